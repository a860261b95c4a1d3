// RMSNorm's fast kernels: the functions of nn/reference/rms_norm.hpp (the same signatures and,
// within the tolerance of tests/rms_norm/test_rms_norm_tiers.cpp, the same results) with the speed
// machinery: thread splits, AVX2 clones, streaming stores (nn/fast/kernel_primitives.hpp). T is the
// storage type (double, float); rrms and dw are double whatever T.
#pragma once

#include <cstddef>

namespace xg::nn::fast {

#include "nn/reference/rms_norm_signatures.inc"  // the signatures, shared by both tiers

}  // namespace xg::nn::fast
