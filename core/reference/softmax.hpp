// softmax's and log_softmax's reference kernels: the formulas of docs/autograd.md, section 7, as
// plain loops. The tensor is seen as (outer, len, inner) around the axis: element j of row (o, i)
// sits at (o len + j) inner + i. The fast kernels (core/fast/softmax.hpp) have the same
// signatures and are tested against these (tests/ops/test_ops_tiers.cpp).
//
// T is the storage: double, or float for a float32 tensor, whose values are read into doubles,
// computed in double (the row maximum, the exponentials and the row sums) and each result
// rounded once when stored (docs/precision.md, "Accumulators").
#pragma once

#include <cstddef>

namespace xg::reference {

/// s_j = e^(x_j - M) / sum_k e^(x_k - M) per row, M the row's maximum.
template <class T>
void softmax_forward(const T* x, T* s, std::size_t outer, std::size_t len, std::size_t inner);
/// dx_j = s_j (g_j - sum_i g_i s_i) per row.
template <class T>
void softmax_backward(const T* s, const T* g, T* dx, std::size_t outer, std::size_t len, std::size_t inner);
/// l_j = (x_j - M) - log sum_k e^(x_k - M) per row.
template <class T>
void log_softmax_forward(const T* x, T* l, std::size_t outer, std::size_t len, std::size_t inner);
/// dx_j = g_j - e^(l_j) sum_i g_i per row.
template <class T>
void log_softmax_backward(const T* l, const T* g, T* dx, std::size_t outer, std::size_t len, std::size_t inner);

}  // namespace xg::reference
