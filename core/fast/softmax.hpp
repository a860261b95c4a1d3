// softmax's and log_softmax's fast kernels: the reference kernels' signatures
// (core/reference/softmax.hpp), with the rows shared between threads. Tested against the
// reference: tests/ops/test_ops_tiers.cpp.
#pragma once

#include <cstddef>

namespace xg::fast {

void softmax_forward(const double* x, double* s, std::size_t outer, std::size_t len, std::size_t inner);
void softmax_backward(const double* s, const double* g, double* dx, std::size_t outer, std::size_t len, std::size_t inner);
void log_softmax_forward(const double* x, double* l, std::size_t outer, std::size_t len, std::size_t inner);
void log_softmax_backward(const double* l, const double* g, double* dx, std::size_t outer, std::size_t len, std::size_t inner);

}  // namespace xg::fast
