// GroupNorm's fast kernels: the functions of nn/reference/group_norm.hpp (the same signatures and,
// within the tolerance of tests/group_norm/test_group_norm_tiers.cpp, the same results) with the speed
// machinery: thread splits, AVX2 clones, streaming stores (nn/fast/kernel_primitives.hpp).
#pragma once

#include <cstddef>

namespace xg::nn::fast {

#include "nn/reference/group_norm_signatures.inc"  // the signatures, shared by both tiers

}  // namespace xg::nn::fast
