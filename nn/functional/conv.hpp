// Convolution over images (N, C, H, W) as functions, with PyTorch's names and argument order.
// conv2d is a fused graph node with a hand-derived backward (docs/derivations/conv2d.md) and a
// *_composed twin built from core ops around `unfold` (the sliding windows as columns): a
// convolution is unfold + matmul. The pooling functions are in nn/functional/pool.hpp, the layers
// in nn/modules/conv.hpp.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/ops/ops.hpp"

namespace xg::nn {

/// A (height, width) pair for kernel sizes, strides, paddings and dilations: one number means
/// the same for both axes (`3`), a braced pair gives each (`{3, 1}`), as PyTorch's int-or-tuple.
struct Size2 {
    std::int64_t h;  ///< along the height axis
    std::int64_t w;  ///< along the width axis
    /// The same value along both axes.
    Size2(std::int64_t both) : h(both), w(both) {}  // NOLINT: implicit on purpose, like PyTorch's int
    /// (height, width).
    Size2(std::int64_t height, std::int64_t width) : h(height), w(width) {}
};

namespace functional {

/// 2-D convolution (cross-correlation, as PyTorch): x (N, C, H, W), weight (O, C / groups, KH,
/// KW), bias (O) or undefined -> (N, O, OH, OW) with OH = (H + 2 padding - dilation (KH - 1) - 1)
/// / stride + 1. Each group of C / groups input channels feeds O / groups output channels. One
/// graph node (im2col + GEMM). Throws xg::Error naming the shapes and arguments when x is not
/// 4-D, weight is not 4-D, C != weight's channels * groups, groups does not divide O, stride or
/// dilation is not positive, padding is negative, or the output would be empty.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), Size2 stride = 1, Size2 padding = 0,
              Size2 dilation = 1, std::int64_t groups = 1);
/// conv2d() built from core ops: per group, matmul(weight as (O/G, C/G KH KW), unfold(x)); same errors.
Tensor conv2d_composed(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), Size2 stride = 1,
                       Size2 padding = 0, Size2 dilation = 1, std::int64_t groups = 1);

/// 1-D convolution: x (N, C, L), weight (O, C / groups, K), bias (O) -> (N, O, OL); conv2d over a
/// height of 1 (three reshapes around one conv2d node). Errors as conv2d, naming conv1d.
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), std::int64_t stride = 1,
              std::int64_t padding = 0, std::int64_t dilation = 1, std::int64_t groups = 1);

/// Sliding windows as columns (torch.nn.functional.unfold, im2col): x (N, C, H, W) -> (N,
/// C KH KW, L), row (c, i, j) holding x[n, c, oh stride - padding + i dilation, ...] for the L =
/// OH OW window positions, 0 in the padding. Built from core ops (pad, slice, stack, reshape).
Tensor unfold(const Tensor& x, Size2 kernel_size, Size2 dilation = 1, Size2 padding = 0, Size2 stride = 1);

/// Constant padding of the last axes (torch.nn.functional.pad, mode 'constant'): `pad` lists
/// (before, after) pairs from the last axis backwards, e.g. {left, right, top, bottom}. Built from
/// cat with constant blocks; the gradient is the middle part. Throws when `pad` has an odd length
/// or more pairs than x has axes.
Tensor pad(const Tensor& x, const std::vector<std::size_t>& pad, double value = 0.0);

}  // namespace functional

}  // namespace xg::nn
