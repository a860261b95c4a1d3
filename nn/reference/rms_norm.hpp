// RMSNorm's reference kernels: docs/derivations/rmsnorm.md as plain loops. x, y, g = dL/dy and dx
// are `rows` contiguous rows of D values; w holds D values; rrms one per row. T is the storage type
// (double for float64 tensors, float for float32 ones); rrms and the dw sums are double whatever T
// (docs/precision.md, "Accumulators"). nn/fast/rms_norm.hpp has the same functions, tested against
// these (ctest -L tiers).
#pragma once

#include <cstddef>

namespace xg::nn::reference {

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

}  // namespace xg::nn::reference
