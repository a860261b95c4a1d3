// max_pool2d's and avg_pool2d's reference kernels: the formulas of docs/derivations/pool2d.md as
// plain loops over the `planes` contiguous (n, c) planes of H x W inputs. The fast kernels
// (nn/fast/pool.hpp) have the same signatures and are tested against these
// (tests/conv/test_conv_tiers.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "nn/reference/window.hpp"

namespace xg::nn::reference {

/// y = the maximum of each window, a = its position r W + q in the plane (the first maximum in
/// row-major window order, or the last NaN; padding never wins).
void max_pool2d_forward(const double* x, std::size_t planes, const detail::Window2d& w, double* y, std::int64_t* a);
/// Adds each g[oh, ow] into dx at the position a[oh, ow] that won.
void max_pool2d_backward(const std::int64_t* a, const double* g, std::size_t planes, const detail::Window2d& w, double* dx);
/// y = (1 / n) sum of the window's input values, n = detail::avg_cell's divisor.
void avg_pool2d_forward(const double* x, std::size_t planes, const detail::Window2d& w, bool count_include_pad, double* y);
/// Adds g[oh, ow] / n into dx at every input value of window (oh, ow).
void avg_pool2d_backward(const double* g, std::size_t planes, const detail::Window2d& w, bool count_include_pad, double* dx);

}  // namespace xg::nn::reference
