// DyT's reference kernels: the formulas of docs/derivations/dyt.md as plain loops over `rows`
// contiguous rows of `width` = prod(normalized_shape) elements. The fast kernels
// (nn/fast/dyt.hpp) have the same signatures and are tested against these
// (tests/dyt/test_dyt_tiers.cpp).
#pragma once

#include <cstddef>

namespace xg::nn::reference {

/// y = w tanh(a x) + b, with w and b of `width` values (ones and zeros when the op has none).
void dyt_forward(const double* x, double a, const double* w, const double* b, double* y, std::size_t rows, std::size_t width);

/// dx (skipped when null), da (written), and dw, db (added into) from the upstream gradient g.
void dyt_backward(const double* x, const double* g, double a, const double* w, double* dx, double& da, double* dw, double* db,
                  std::size_t rows, std::size_t width);

}  // namespace xg::nn::reference
