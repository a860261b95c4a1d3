// LayerNorm's fast kernels: the functions of nn/reference/layer_norm.hpp (the same signatures and,
// within the tolerance of tests/layer_norm/test_layer_norm_tiers.cpp, the same results) with the speed
// machinery: thread splits, AVX2 clones, streaming stores (nn/fast/kernel_primitives.hpp). T is the
// storage type (double, float); statistics and dw, db are double whatever T.
#pragma once

#include <cstddef>

namespace xg::nn::fast {

#include "nn/reference/layer_norm_signatures.inc"  // the signatures, shared by both tiers

}  // namespace xg::nn::fast
