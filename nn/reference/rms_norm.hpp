// RMSNorm's reference kernels: docs/derivations/rmsnorm.md as plain loops. x, y, g = dL/dy and dx
// are `rows` contiguous rows of D values; w and dw hold D values; rrms one per row.
// nn/fast/rms_norm.hpp has the same functions, tested against these (ctest -L tiers).
#pragma once

#include <cstddef>

namespace xg::nn::reference {

/// Per row: rrms = 1 / sqrt(mean(x^2) + eps), y = xhat w with xhat = x rrms.
void rms_norm_forward(const double* x, const double* w, double* y, double* rrms, std::size_t rows, std::size_t D, double eps);

/// dx (skipped when null) and dw += sum over rows of g xhat (zeros on entry).
void rms_norm_backward(const double* x, const double* g, const double* w, const double* rrms, double* dx, double* dw,
                       std::size_t rows, std::size_t D);

}  // namespace xg::nn::reference
