// Internal to nn/: the argument checks that produce the geometry of a 2-D sliding window
// (convolution, pooling, unfold; the geometry itself is in nn/reference/window.hpp), so every op
// computes output sizes and reports bad arguments the same way.
#pragma once

#include <cstddef>
#include <string>

#include "core/engine/tensor.hpp"
#include "nn/functional/conv.hpp"
#include "nn/reference/window.hpp"

namespace xg::nn::detail {

/// The window over x's last two axes for kernel/stride/padding/dilation, after checking them:
/// kernel, stride and dilation positive, padding non-negative (and, for pooling, at most half the
/// kernel), and a non-empty output. ceil_mode rounds the output size up as PyTorch's pooling does.
/// Errors name `op`, the argument and x's shape.
Window2d make_window(const char* op, const Shape& x, Size2 kernel, Size2 stride, Size2 padding, Size2 dilation,
                     bool ceil_mode = false, bool pooling = false);

/// "(a, b)" for error messages.
std::string size2_str(Size2 s);

/// Checks that x is (N, C, H, W); throws naming `op` and x's shape otherwise.
void check_image(const char* op, const Tensor& x);

}  // namespace xg::nn::detail
