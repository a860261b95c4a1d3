// Convolution and pooling layers over images (N, C, H, W), with PyTorch's names, argument order,
// parameter shapes and initialisation. The functions they call (conv2d, max_pool2d, ...) are in
// nn/functional/conv.hpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/ops/ops.hpp"
#include "nn/functional/conv.hpp"
#include "nn/functional/pool.hpp"
#include "nn/modules/module.hpp"

namespace xg::nn {

/// 2-D convolution layer: weight (out_channels, in_channels / groups, KH, KW), bias (out_channels).
/// Init as PyTorch: weight and bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in_channels /
/// groups * KH * KW (kaiming_uniform_ with a = sqrt(5)), from the default generator.
class Conv2d : public Module {
public:
    /// Throws xg::Error when a channel count or the kernel size is not positive, groups does not
    /// divide both channel counts, or stride / padding / dilation are out of range.
    Conv2d(std::int64_t in_channels, std::int64_t out_channels, Size2 kernel_size, Size2 stride = 1, Size2 padding = 0,
           Size2 dilation = 1, std::int64_t groups = 1, bool bias = true);
    /// (N, in_channels, H, W) -> (N, out_channels, OH, OW), or unbatched (in_channels, H, W) ->
    /// (out_channels, OH, OW); other shapes throw naming them.
    Tensor forward(const Tensor& x) override;
    std::string extra_repr() const override;

    ///@{
    /// Channels in and out.
    std::size_t in_channels, out_channels;
    ///@}
    ///@{
    /// Window geometry, as given to the constructor.
    Size2 kernel_size, stride, padding, dilation;
    ///@}
    /// Channel groups (1: every output sees every input channel).
    std::size_t groups;
    /// Weight (out_channels, in_channels / groups, KH, KW); bias (out_channels).
    Parameter weight, bias;  ///< bias is undefined when constructed with bias = false
};

/// 1-D convolution layer over (N, C, L): weight (out_channels, in_channels / groups, K), bias
/// (out_channels); init as Conv2d with fan_in = in_channels / groups * K.
class Conv1d : public Module {
public:
    /// Errors as Conv2d.
    Conv1d(std::int64_t in_channels, std::int64_t out_channels, std::int64_t kernel_size, std::int64_t stride = 1,
           std::int64_t padding = 0, std::int64_t dilation = 1, std::int64_t groups = 1, bool bias = true);
    /// (N, in_channels, L) -> (N, out_channels, OL), or unbatched (in_channels, L) -> (out_channels, OL).
    Tensor forward(const Tensor& x) override;
    std::string extra_repr() const override;

    ///@{
    /// Channels in and out.
    std::size_t in_channels, out_channels;
    ///@}
    ///@{
    /// Window geometry, as given to the constructor.
    std::size_t kernel_size, stride, padding, dilation, groups;
    ///@}
    /// Weight (out_channels, in_channels / groups, K); bias (out_channels).
    Parameter weight, bias;  ///< bias is undefined when constructed with bias = false
};

/// Max pooling (functional::max_pool2d) of (N, C, H, W) or unbatched (C, H, W); no parameters. As
/// libtorch's MaxPool2d, the indices come from forward_with_indices rather than a return_indices flag.
class MaxPool2d : public Module {
public:
    /// stride defaults to kernel_size. Bad geometry throws at forward, naming the input's shape.
    explicit MaxPool2d(Size2 kernel_size, std::optional<Size2> stride = std::nullopt, Size2 padding = 0,
                       Size2 dilation = 1, bool ceil_mode = false);
    Tensor forward(const Tensor& x) override;
    /// The output and the flat in-plane position of each maximum.
    functional::MaxPoolResult forward_with_indices(const Tensor& x);
    std::string extra_repr() const override;

    ///@{
    /// Window geometry.
    Size2 kernel_size, stride, padding, dilation;
    ///@}
    /// Round the output size up instead of down.
    bool ceil_mode;
};

/// Average pooling (functional::avg_pool2d) of (N, C, H, W) or unbatched (C, H, W); no parameters.
class AvgPool2d : public Module {
public:
    /// stride defaults to kernel_size.
    explicit AvgPool2d(Size2 kernel_size, std::optional<Size2> stride = std::nullopt, Size2 padding = 0,
                       bool ceil_mode = false, bool count_include_pad = true);
    Tensor forward(const Tensor& x) override;
    std::string extra_repr() const override;

    ///@{
    /// Window geometry.
    Size2 kernel_size, stride, padding;
    ///@}
    ///@{
    /// Round the output size up; count the zero padding in each window's divisor.
    bool ceil_mode, count_include_pad;
    ///@}
};

/// Adaptive average pooling to a fixed output_size (functional::adaptive_avg_pool2d) of (N, C, H,
/// W) or unbatched (C, H, W); (1, 1) is global average pooling.
class AdaptiveAvgPool2d : public Module {
public:
    /// output_size must be positive.
    explicit AdaptiveAvgPool2d(Size2 output_size);
    Tensor forward(const Tensor& x) override;
    std::string extra_repr() const override;

    /// (OH, OW).
    Size2 output_size;
};

/// Flattens axes start_dim..end_dim (inclusive, negative counts from the end) into one, as
/// torch.nn.Flatten: (N, C, H, W) -> (N, C H W) by default. A reshape.
class Flatten : public Module {
public:
    /// Defaults: every axis after the batch axis.
    explicit Flatten(int start_dim = 1, int end_dim = -1);
    /// Throws xg::Error when the axes are out of range for x or start_dim comes after end_dim.
    Tensor forward(const Tensor& x) override;
    std::string extra_repr() const override;

    ///@{
    /// First and last axis flattened.
    int start_dim, end_dim;
    ///@}
};

}  // namespace xg::nn
