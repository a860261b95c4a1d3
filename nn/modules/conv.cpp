// Conv2d, Conv1d, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d and Flatten over nn/modules/conv.hpp's functions.
#include <cmath>

#include <fmt/format.h>

#include "nn/modules/conv.hpp"
#include "nn/modules/init.hpp"
#include "nn/functional/window.hpp"

namespace xg::nn {

namespace {

using detail::size2_str;

void check_channels(const char* op, std::size_t in, std::size_t out, std::size_t groups) {
    if (in == 0 || out == 0 || groups == 0 || in % groups != 0 || out % groups != 0) {
        fail(op, fmt::format("in_channels ({}) and out_channels ({}) must be positive multiples of groups ({})", in, out, groups));
    }
}

// PyTorch's reset_parameters: kaiming_uniform_(a = sqrt(5)) gives U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and the bias the same.
Tensor conv_weight(const Shape& shape) { return init::kaiming_uniform_(zeros(shape), std::sqrt(5.0)); }
Tensor conv_bias(std::size_t out, std::size_t fan_in) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    return init::uniform_(zeros({out}), -bound, bound);
}

}  // namespace

// ---- Conv2d -------------------------------------------------------------------------------------

Conv2d::Conv2d(std::int64_t in_, std::int64_t out_, Size2 k, Size2 s, Size2 p, Size2 d, std::int64_t g_, bool with_bias)
    : in_channels(positive_size(in_, "Conv2d", "in_channels")), out_channels(positive_size(out_, "Conv2d", "out_channels")),
      kernel_size(k), stride(s), padding(p), dilation(d), groups(positive_size(g_, "Conv2d", "groups")) {
    const std::size_t in = in_channels, out = out_channels, g = groups;
    check_channels("Conv2d", in, out, g);
    if (k.h <= 0 || k.w <= 0 || s.h <= 0 || s.w <= 0 || d.h <= 0 || d.w <= 0 || p.h < 0 || p.w < 0) {
        fail("Conv2d", fmt::format("kernel_size {}, stride {} and dilation {} must be positive and padding {} non-negative",
                                   size2_str(k), size2_str(s), size2_str(d), size2_str(p)));
    }
    const std::size_t kh = static_cast<std::size_t>(k.h), kw = static_cast<std::size_t>(k.w);
    register_parameter("weight", weight, conv_weight({out, in / g, kh, kw}));
    if (with_bias) register_parameter("bias", bias, conv_bias(out, in / g * kh * kw));
}

Tensor Conv2d::forward(const Tensor& x) {
    const Shape s = x.shape();
    if (s.size() == 3 && s[0] == in_channels) return squeeze(forward(unsqueeze(x, 0)), 0);  // unbatched (C, H, W)
    if (s.size() != 4 || s[1] != in_channels) {
        fail("Conv2d", fmt::format("expects input (N, {0}, H, W) or ({0}, H, W), got {1}", in_channels, shape_str(s)));
    }
    return functional::conv2d(x, weight, bias, stride, padding, dilation, static_cast<std::int64_t>(groups));
}

std::string Conv2d::extra_repr() const {
    std::string s = fmt::format("{}, {}, kernel_size={}, stride={}", in_channels, out_channels, size2_str(kernel_size),
                                size2_str(stride));
    if (padding.h != 0 || padding.w != 0) s += fmt::format(", padding={}", size2_str(padding));
    if (dilation.h != 1 || dilation.w != 1) s += fmt::format(", dilation={}", size2_str(dilation));
    if (groups != 1) s += fmt::format(", groups={}", groups);
    if (!bias.defined()) s += ", bias=False";
    return s;
}

// ---- Conv1d -------------------------------------------------------------------------------------

Conv1d::Conv1d(std::int64_t in_, std::int64_t out_, std::int64_t k_, std::int64_t s_, std::int64_t p_, std::int64_t d_,
               std::int64_t g_, bool with_bias)
    : in_channels(positive_size(in_, "Conv1d", "in_channels")), out_channels(positive_size(out_, "Conv1d", "out_channels")),
      kernel_size(positive_size(k_, "Conv1d", "kernel_size")), stride(positive_size(s_, "Conv1d", "stride")),
      padding(p_ >= 0 ? static_cast<std::size_t>(p_) : 0), dilation(positive_size(d_, "Conv1d", "dilation")),
      groups(positive_size(g_, "Conv1d", "groups")) {
    if (p_ < 0) fail("Conv1d", fmt::format("padding must be non-negative, got {}", p_));
    const std::size_t in = in_channels, out = out_channels, g = groups, k = kernel_size;
    check_channels("Conv1d", in, out, g);
    register_parameter("weight", weight, conv_weight({out, in / g, k}));
    if (with_bias) register_parameter("bias", bias, conv_bias(out, in / g * k));
}

Tensor Conv1d::forward(const Tensor& x) {
    const Shape s = x.shape();
    if (s.size() == 2 && s[0] == in_channels) return squeeze(forward(unsqueeze(x, 0)), 0);  // unbatched (C, L)
    if (s.size() != 3 || s[1] != in_channels) {
        fail("Conv1d", fmt::format("expects input (N, {0}, L) or ({0}, L), got {1}", in_channels, shape_str(s)));
    }
    const auto i = [](std::size_t v) { return static_cast<std::int64_t>(v); };
    return functional::conv1d(x, weight, bias, i(stride), i(padding), i(dilation), i(groups));
}

std::string Conv1d::extra_repr() const {
    std::string s = fmt::format("{}, {}, kernel_size=({},), stride=({},)", in_channels, out_channels, kernel_size, stride);
    if (padding != 0) s += fmt::format(", padding=({},)", padding);
    if (dilation != 1) s += fmt::format(", dilation=({},)", dilation);
    if (groups != 1) s += fmt::format(", groups={}", groups);
    if (!bias.defined()) s += ", bias=False";
    return s;
}

// ---- pooling ------------------------------------------------------------------------------------

MaxPool2d::MaxPool2d(Size2 k, std::optional<Size2> s, Size2 p, Size2 d, bool ceil)
    : kernel_size(k), stride(s.value_or(k)), padding(p), dilation(d), ceil_mode(ceil) {}

Tensor MaxPool2d::forward(const Tensor& x) { return forward_with_indices(x).output; }

functional::MaxPoolResult MaxPool2d::forward_with_indices(const Tensor& x) {
    if (x.dim() == 3) {  // unbatched (C, H, W)
        functional::MaxPoolResult r = forward_with_indices(unsqueeze(x, 0));
        r.indices.reshape({r.indices.shape()[1], r.indices.shape()[2], r.indices.shape()[3]});
        return {squeeze(r.output, 0), r.indices};
    }
    return functional::max_pool2d_with_indices(x, kernel_size, stride, padding, dilation, ceil_mode);
}

std::string MaxPool2d::extra_repr() const {
    return fmt::format("kernel_size={}, stride={}, padding={}, dilation={}, ceil_mode={}", size2_str(kernel_size),
                       size2_str(stride), size2_str(padding), size2_str(dilation), ceil_mode);
}

AvgPool2d::AvgPool2d(Size2 k, std::optional<Size2> s, Size2 p, bool ceil, bool include_pad)
    : kernel_size(k), stride(s.value_or(k)), padding(p), ceil_mode(ceil), count_include_pad(include_pad) {}

Tensor AvgPool2d::forward(const Tensor& x) {
    if (x.dim() == 3) return squeeze(forward(unsqueeze(x, 0)), 0);  // unbatched (C, H, W)
    return functional::avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad);
}

std::string AvgPool2d::extra_repr() const {
    return fmt::format("kernel_size={}, stride={}, padding={}, ceil_mode={}, count_include_pad={}", size2_str(kernel_size),
                       size2_str(stride), size2_str(padding), ceil_mode, count_include_pad);
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(Size2 size) : output_size(size) {
    if (size.h <= 0 || size.w <= 0) fail("AdaptiveAvgPool2d", fmt::format("output_size must be positive, got {}", size2_str(size)));
}

Tensor AdaptiveAvgPool2d::forward(const Tensor& x) {
    if (x.dim() == 3) return squeeze(forward(unsqueeze(x, 0)), 0);  // unbatched (C, H, W)
    return functional::adaptive_avg_pool2d(x, output_size);
}

std::string AdaptiveAvgPool2d::extra_repr() const { return fmt::format("output_size={}", size2_str(output_size)); }

// ---- Flatten ------------------------------------------------------------------------------------

Flatten::Flatten(int start, int end) : start_dim(start), end_dim(end) {}

Tensor Flatten::forward(const Tensor& x) {
    const Shape s = x.shape();
    const std::size_t first = normalize_axis(start_dim, s.size(), "Flatten"), last = normalize_axis(end_dim, s.size(), "Flatten");
    if (first > last) {
        fail("Flatten", fmt::format("start_dim {} comes after end_dim {} for input {}", start_dim, end_dim, shape_str(s)));
    }
    std::vector<long> shape;
    long merged = 1;
    for (std::size_t a = 0; a < s.size(); ++a) {
        if (a < first || a > last) shape.push_back(static_cast<long>(s[a]));
        else merged *= static_cast<long>(s[a]);
        if (a == last) shape.push_back(merged);
    }
    return reshape(x, shape);
}

std::string Flatten::extra_repr() const { return fmt::format("start_dim={}, end_dim={}", start_dim, end_dim); }

}  // namespace xg::nn
