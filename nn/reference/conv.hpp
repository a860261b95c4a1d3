// conv2d's reference kernels: the sums of docs/derivations/conv2d.md as direct loops over every
// output, group channel and kernel tap. The fast kernels (nn/fast/conv.hpp: im2col and a GEMM per
// sample and group) have the same signatures and are tested against these
// (tests/conv/test_conv_tiers.cpp).
#pragma once

#include "nn/reference/window.hpp"

namespace xg::nn::reference {

/// y[n, o, oh, ow] = b_o + sum over the group's c and the taps (i, j) of W[o, c, i, j] x[n, c, r, q];
/// b null: no bias.
void conv2d_forward(const double* x, const double* w, const double* b, double* y, const detail::ConvDims& d);

/// Adds dL/dx into dx, dL/dW into dw and dL/db into db (each skipped when null) from g = dL/dy.
/// x is read only for dw, w only for dx.
void conv2d_backward(const double* x, const double* w, const double* g, double* dx, double* dw, double* db,
                     const detail::ConvDims& d);

}  // namespace xg::nn::reference
