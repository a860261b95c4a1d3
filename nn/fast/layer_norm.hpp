// LayerNorm's fast kernels: the functions of nn/reference/layer_norm.hpp (the same signatures and,
// within the tolerance of tests/layer_norm/test_layer_norm_tiers.cpp, the same results) with the speed
// machinery: thread splits, AVX2 clones, streaming stores (nn/fast/kernel_primitives.hpp). T is the
// storage type (double, float); statistics and dw, db are double whatever T.
#pragma once

#include <cstddef>

namespace xg::nn::fast {

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

}  // namespace xg::nn::fast
