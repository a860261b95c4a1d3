// DyT's fast kernels: the reference kernels' signatures (nn/reference/dyt.hpp); the backward sums
// each row's share of da in kLanes partial sums (nn/fast/kernel_primitives.hpp). Tested against
// the reference: tests/dyt/test_dyt_tiers.cpp.
#pragma once

#include <cstddef>

namespace xg::nn::fast {

void dyt_forward(const double* x, double a, const double* w, const double* b, double* y, std::size_t rows, std::size_t width);
void dyt_backward(const double* x, const double* g, double a, const double* w, double* dx, double& da, double* dw, double* db,
                  std::size_t rows, std::size_t width);

}  // namespace xg::nn::fast
