// Convolution and pooling over images (N, C, H, W) as functions, with PyTorch's names and
// argument order. conv2d, max_pool2d and avg_pool2d are fused graph nodes with hand-derived
// backwards (docs/derivations/conv2d.md, docs/derivations/pool2d.md); each has a *_composed twin
// built from core ops around `unfold` (the sliding windows as columns): a convolution is unfold +
// matmul, a pooling is unfold + max or mean. The layers are in nn/modules/conv.hpp.
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

/// What max_pool2d_with_indices returns.
struct MaxPoolResult {
    Tensor output;       ///< (N, C, OH, OW)
    IndexArray indices;  ///< (N, C, OH, OW): flat position h W + w of each maximum in its input plane
};

/// Max over each window: x (N, C, H, W) -> (N, C, OH, OW). stride defaults to kernel_size;
/// padding (at most half the kernel) never wins; ceil_mode rounds the output size up (a last
/// window must still start inside the input or its left padding). Ties go to the first maximum
/// in row-major window order, and a NaN wins (the last NaN of the window), as PyTorch's CPU
/// kernel; the gradient goes to that one element. Throws naming the shapes and arguments.
Tensor max_pool2d(const Tensor& x, Size2 kernel_size, std::optional<Size2> stride = std::nullopt, Size2 padding = 0,
                  Size2 dilation = 1, bool ceil_mode = false);
/// max_pool2d() and the position of each maximum (PyTorch's return_indices=True).
MaxPoolResult max_pool2d_with_indices(const Tensor& x, Size2 kernel_size, std::optional<Size2> stride = std::nullopt,
                                      Size2 padding = 0, Size2 dilation = 1, bool ceil_mode = false);
/// max_pool2d() built from core ops: max over the unfolded windows (padded with -inf). Same
/// values; at tied maxima core max shares the gradient equally instead of giving it to one.
Tensor max_pool2d_composed(const Tensor& x, Size2 kernel_size, std::optional<Size2> stride = std::nullopt,
                           Size2 padding = 0, Size2 dilation = 1, bool ceil_mode = false);

/// Mean over each window: x (N, C, H, W) -> (N, C, OH, OW). stride defaults to kernel_size.
/// count_include_pad: divide by the window's size clipped to the padded input (PyTorch's rule,
/// so a ceil_mode window hanging past the padding divides by less), else by the number of input
/// elements it covers. Throws naming the shapes and arguments.
Tensor avg_pool2d(const Tensor& x, Size2 kernel_size, std::optional<Size2> stride = std::nullopt, Size2 padding = 0,
                  bool ceil_mode = false, bool count_include_pad = true);
/// avg_pool2d() built from core ops: the sum over the unfolded windows divided by each window's count.
Tensor avg_pool2d_composed(const Tensor& x, Size2 kernel_size, std::optional<Size2> stride = std::nullopt,
                           Size2 padding = 0, bool ceil_mode = false, bool count_include_pad = true);

/// Mean over adaptive windows: x (N, C, H, W) -> (N, C, OH, OW), output cell i covering input
/// rows floor(i H / OH) to ceil((i + 1) H / OH) (the same along the width). output_size (1, 1) is
/// global average pooling. A mean per cell built from core ops (narrow, mean, stack, reshape).
Tensor adaptive_avg_pool2d(const Tensor& x, Size2 output_size);

}  // namespace functional

}  // namespace xg::nn
