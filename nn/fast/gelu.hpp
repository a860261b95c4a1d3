// GELU's fast kernels: the reference kernels' signatures (nn/reference/gelu.hpp), with glibc's
// vector math (nn/fast/simd_math.hpp), AVX2 clones and the elements shared between threads.
// Tested against the reference: tests/gelu/test_gelu_tiers.cpp.
#pragma once

#include <cstddef>

#include "nn/functional/functional.hpp"

namespace xg::nn::fast {

void gelu_forward(const double* x, double* y, std::size_t n, functional::GeluApproximate approximate);
void gelu_backward(const double* x, const double* y, const double* dy, double* dx, std::size_t n,
                   functional::GeluApproximate approximate);

}  // namespace xg::nn::fast
