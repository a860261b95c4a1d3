// Pooling over images (N, C, H, W) as functions, with PyTorch's names and argument order.
// max_pool2d and avg_pool2d are fused graph nodes with hand-derived backwards
// (docs/derivations/pool2d.md); each has a *_composed twin built from core ops: max or mean over
// `unfold`'s windows (nn/functional/conv.hpp, which also defines Size2). The layers are in
// nn/modules/conv.hpp.
#pragma once

#include <optional>

#include "core/ops/ops.hpp"
#include "nn/functional/conv.hpp"

namespace xg::nn::functional {

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

}  // namespace xg::nn::functional
