// softmax's and log_softmax's reference kernels: the formulas of docs/autograd.md, section 7, as
// plain loops. The tensor is seen as (outer, len, inner) around the axis: element j of row (o, i)
// sits at (o len + j) inner + i. The fast kernels (core/fast/softmax.hpp) have the same
// signatures and are tested against these (tests/ops/test_ops_tiers.cpp).
#pragma once

#include <cstddef>

namespace xg::reference {

/// s_j = e^(x_j - M) / sum_k e^(x_k - M) per row, M the row's maximum.
void softmax_forward(const double* x, double* s, std::size_t outer, std::size_t len, std::size_t inner);
/// dx_j = s_j (g_j - sum_i g_i s_i) per row.
void softmax_backward(const double* s, const double* g, double* dx, std::size_t outer, std::size_t len, std::size_t inner);
/// l_j = (x_j - M) - log sum_k e^(x_k - M) per row.
void log_softmax_forward(const double* x, double* l, std::size_t outer, std::size_t len, std::size_t inner);
/// dx_j = g_j - e^(l_j) sum_i g_i per row.
void log_softmax_backward(const double* l, const double* g, double* dx, std::size_t outer, std::size_t len, std::size_t inner);

}  // namespace xg::reference
