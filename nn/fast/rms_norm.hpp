// RMSNorm's fast kernels: the functions of nn/reference/rms_norm.hpp (the same signatures and,
// within the tolerance of tests/rms_norm/test_rms_norm_tiers.cpp, the same results) with the speed
// machinery: thread splits, AVX2 clones, streaming stores (nn/fast/kernel_primitives.hpp). T is the
// storage type (double, float); rrms and dw are double whatever T.
#pragma once

#include <cstddef>

namespace xg::nn::fast {

/// Per row: rrms = 1 / sqrt(mean(x^2) + eps), y = xhat w with xhat = x rrms.
template <class T>
void rms_norm_forward(const T* x, const T* w, T* y, double* rrms, std::size_t rows, std::size_t D, double eps);

/// dx (skipped when null) and dw += sum over rows of g xhat (zeros on entry).
template <class T>
void rms_norm_backward(const T* x, const T* g, const T* w, const double* rrms, T* dx, double* dw, std::size_t rows,
                       std::size_t D);

extern template void rms_norm_forward<double>(const double*, const double*, double*, double*, std::size_t, std::size_t, double);
extern template void rms_norm_forward<float>(const float*, const float*, float*, double*, std::size_t, std::size_t, double);
extern template void rms_norm_backward<double>(const double*, const double*, const double*, const double*, double*, double*,
                                               std::size_t, std::size_t);
extern template void rms_norm_backward<float>(const float*, const float*, const float*, const double*, float*, double*,
                                              std::size_t, std::size_t);

}  // namespace xg::nn::fast
