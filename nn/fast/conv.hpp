// conv2d's fast kernels: the reference kernels' signatures (nn/reference/conv.hpp), computed as
// im2col + one GEMM per sample and group, samples shared between threads. Tested against the
// reference: tests/conv/test_conv_tiers.cpp.
#pragma once

#include "nn/reference/window.hpp"

namespace xg::nn::fast {

void conv2d_forward(const double* x, const double* w, const double* b, double* y, const detail::ConvDims& d);
void conv2d_backward(const double* x, const double* w, const double* g, double* dx, double* dw, double* db,
                     const detail::ConvDims& d);

}  // namespace xg::nn::fast
