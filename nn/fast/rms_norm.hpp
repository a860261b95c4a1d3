// RMSNorm's fast kernels: the functions of nn/reference/rms_norm.hpp (the same signatures and,
// within the tolerance of tests/rms_norm/test_rms_norm_tiers.cpp, the same results) with the speed
// machinery: thread splits, AVX2 clones, streaming stores (nn/fast/kernel_primitives.hpp).
#pragma once

#include <cstddef>

namespace xg::nn::fast {

/// Per row: rrms = 1 / sqrt(mean(x^2) + eps), y = xhat w with xhat = x rrms.
void rms_norm_forward(const double* x, const double* w, double* y, double* rrms, std::size_t rows, std::size_t D, double eps);

/// dx (skipped when null) and dw += sum over rows of g xhat (zeros on entry).
void rms_norm_backward(const double* x, const double* g, const double* w, const double* rrms, double* dx, double* dw,
                       std::size_t rows, std::size_t D);

}  // namespace xg::nn::fast
