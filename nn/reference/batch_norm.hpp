// BatchNorm's reference kernels: docs/derivations/batchnorm.md as plain loops. x, y, g = dL/dy and
// dx are (N, C, L) (a 2-D input has L = 1, (N, C, H, W) has L = H W): channel c's M = N L values
// are x[(i C + c) L + l]. w, b, mean, var, rstd, dw and db hold C values.
// nn/fast/batch_norm.hpp has the same functions, tested against these (ctest -L tiers).
#pragma once

#include <cstddef>

namespace xg::nn::reference {

#include "nn/reference/batch_norm_signatures.inc"  // the signatures, shared by both tiers

}  // namespace xg::nn::reference
