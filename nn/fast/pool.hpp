// max_pool2d's and avg_pool2d's fast kernels: the reference kernels' signatures
// (nn/reference/pool.hpp); average pooling works out each window's cell once per call. Tested
// against the reference: tests/conv/test_conv_tiers.cpp.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nn/reference/window.hpp"

namespace xg::nn::fast {

#include "nn/reference/pool_signatures.inc"  // the signatures, shared by both tiers

}  // namespace xg::nn::fast
