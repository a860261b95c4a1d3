// GELU's reference kernels: the formulas of docs/derivations/gelu.md as plain loops over n
// elements, for float64 (T = double) and float32 storage (T = float: each value is widened, the
// formula runs in double, the result is rounded once - docs/precision.md). The fast kernels
// (nn/fast/gelu.hpp) have the same signatures and are tested against these
// (tests/gelu/test_gelu_tiers.cpp).
#pragma once

#include <cstddef>


namespace xg::nn::reference {

/// y = gelu(x): exact, x Phi(x); else PyTorch's tanh approximation (functional::GeluApproximate::tanh).
template <class T>
void gelu_forward(const T* x, T* y, std::size_t n, bool exact);

/// dx = dy gelu'(x). y is the forward's output: the fast exact kernel reads Phi(x) = y / x from it,
/// the reference recomputes Phi(x) from x.
template <class T>
void gelu_backward(const T* x, const T* y, const T* dy, T* dx, std::size_t n, bool exact);

extern template void gelu_forward<double>(const double*, double*, std::size_t, bool);
extern template void gelu_forward<float>(const float*, float*, std::size_t, bool);
extern template void gelu_backward<double>(const double*, const double*, const double*, double*, std::size_t, bool);
extern template void gelu_backward<float>(const float*, const float*, const float*, float*, std::size_t, bool);

}  // namespace xg::nn::reference
