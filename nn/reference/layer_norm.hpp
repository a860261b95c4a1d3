// LayerNorm's reference kernels: docs/derivations/layernorm.md as plain loops. x, y, g = dL/dy and
// dx are `rows` contiguous rows of D values; w, b hold D values; mean and rstd one per row. T is the
// storage type (double for float64 tensors, float for float32 ones); the statistics and the dw, db
// sums are double whatever T (docs/precision.md, "Accumulators"). nn/fast/layer_norm.hpp has the
// same functions, tested against these (ctest -L tiers).
#pragma once

#include <cstddef>

namespace xg::nn::reference {

/// Per row: mean, rstd = 1 / sqrt(var + eps), y = xhat w + b with xhat = (x - mean) rstd.
template <class T>
void layer_norm_forward(const T* x, const T* w, const T* b, T* y, double* mean, double* rstd, std::size_t rows, std::size_t D,
                        double eps);

/// dx (skipped when null) and dw += sum over rows of g xhat, db += sum of g (zeros on entry).
template <class T>
void layer_norm_backward(const T* x, const T* g, const T* w, const double* mean, const double* rstd, T* dx, double* dw,
                         double* db, std::size_t rows, std::size_t D);

extern template void layer_norm_forward<double>(const double*, const double*, const double*, double*, double*, double*,
                                                std::size_t, std::size_t, double);
extern template void layer_norm_forward<float>(const float*, const float*, const float*, float*, double*, double*, std::size_t,
                                               std::size_t, double);
extern template void layer_norm_backward<double>(const double*, const double*, const double*, const double*, const double*,
                                                 double*, double*, double*, std::size_t, std::size_t);
extern template void layer_norm_backward<float>(const float*, const float*, const float*, const double*, const double*, float*,
                                                double*, double*, std::size_t, std::size_t);

}  // namespace xg::nn::reference
