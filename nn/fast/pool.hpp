// max_pool2d's and avg_pool2d's fast kernels: the reference kernels' signatures
// (nn/reference/pool.hpp); average pooling works out each window's cell once per call. Tested
// against the reference: tests/conv/test_conv_tiers.cpp.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nn/reference/window.hpp"

namespace xg::nn::fast {


void max_pool2d_forward(const double* x, std::size_t planes, const detail::Window2d& w, double* y, std::int64_t* a);

void max_pool2d_backward(const std::int64_t* a, const double* g, std::size_t planes, const detail::Window2d& w, double* dx);

void avg_pool2d_forward(const double* x, std::size_t planes, const detail::Window2d& w, bool count_include_pad, double* y);

void avg_pool2d_backward(const double* g, std::size_t planes, const detail::Window2d& w, bool count_include_pad, double* dx);

}  // namespace xg::nn::fast
