// softmax's and log_softmax's fast kernels: the reference kernels' signatures
// (core/reference/softmax.hpp), with the rows shared between threads. Tested against the
// reference: tests/ops/test_ops_tiers.cpp. T = double or float (float32 storage, double arithmetic
// between the loads and the one rounding of each result, as the reference).
#pragma once

#include <cstddef>

namespace xg::fast {

template <class T>
void softmax_forward(const T* x, T* s, std::size_t outer, std::size_t len, std::size_t inner);
template <class T>
void softmax_backward(const T* s, const T* g, T* dx, std::size_t outer, std::size_t len, std::size_t inner);
template <class T>
void log_softmax_forward(const T* x, T* l, std::size_t outer, std::size_t len, std::size_t inner);
template <class T>
void log_softmax_backward(const T* l, const T* g, T* dx, std::size_t outer, std::size_t len, std::size_t inner);

}  // namespace xg::fast
