// LayerNorm's reference kernels: docs/derivations/layernorm.md as plain loops. x, y, g = dL/dy and
// dx are `rows` contiguous rows of D values; w, b, dw and db hold D values; mean and rstd one per
// row. nn/fast/layer_norm.hpp has the same functions, tested against these (ctest -L tiers).
#pragma once

#include <cstddef>

namespace xg::nn::reference {

/// Per row: mean, rstd = 1 / sqrt(var + eps), y = xhat w + b with xhat = (x - mean) rstd.
void layer_norm_forward(const double* x, const double* w, const double* b, double* y, double* mean, double* rstd,
                        std::size_t rows, std::size_t D, double eps);

/// dx (skipped when null) and dw += sum over rows of g xhat, db += sum of g (zeros on entry).
void layer_norm_backward(const double* x, const double* g, const double* w, const double* mean, const double* rstd, double* dx,
                         double* dw, double* db, std::size_t rows, std::size_t D);

}  // namespace xg::nn::reference
