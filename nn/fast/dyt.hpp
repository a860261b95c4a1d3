// DyT's fast kernels: the reference kernels' signatures (nn/reference/dyt.hpp); the backward sums
// each row's share of da in kLanes partial sums (nn/fast/kernel_primitives.hpp). Tested against
// the reference: tests/dyt/test_dyt_tiers.cpp.
#pragma once

#include <cstddef>

namespace xg::nn::fast {

#include "nn/reference/dyt_signatures.inc"  // the signatures, shared by both tiers

}  // namespace xg::nn::fast
