// LayerNorm's fast kernels: the functions of nn/reference/layer_norm.hpp (the same signatures and,
// within the tolerance of tests/layer_norm/test_layer_norm_tiers.cpp, the same results) with the speed
// machinery: thread splits, AVX2 clones, streaming stores (nn/fast/kernel_primitives.hpp).
#pragma once

#include <cstddef>

namespace xg::nn::fast {

/// Per row: mean, rstd = 1 / sqrt(var + eps), y = xhat w + b with xhat = (x - mean) rstd.
void layer_norm_forward(const double* x, const double* w, const double* b, double* y, double* mean, double* rstd,
                        std::size_t rows, std::size_t D, double eps);

/// dx (skipped when null) and dw += sum over rows of g xhat, db += sum of g (zeros on entry).
void layer_norm_backward(const double* x, const double* g, const double* w, const double* mean, const double* rstd, double* dx,
                         double* dw, double* db, std::size_t rows, std::size_t D);

}  // namespace xg::nn::fast
