// GELU's reference kernels: the formulas of docs/derivations/gelu.md as plain loops over n
// elements. The fast kernels (nn/fast/gelu.hpp) have the same signatures and are tested against
// these (tests/gelu/test_gelu_tiers.cpp).
#pragma once

#include <cstddef>

#include "nn/functional/functional.hpp"

namespace xg::nn::reference {

/// y = gelu(x), exact (x Phi(x)) or PyTorch's tanh approximation.
void gelu_forward(const double* x, double* y, std::size_t n, functional::GeluApproximate approximate);

/// dx = dy gelu'(x). y is the forward's output: the fast exact kernel reads Phi(x) = y / x from it,
/// the reference recomputes Phi(x) from x.
void gelu_backward(const double* x, const double* y, const double* dy, double* dx, std::size_t n,
                   functional::GeluApproximate approximate);

}  // namespace xg::nn::reference
