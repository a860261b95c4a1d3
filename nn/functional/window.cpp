#include "nn/functional/window.hpp"

#include <fmt/format.h>

namespace xg::nn::detail {

std::string size2_str(Size2 s) { return fmt::format("({}, {})", s.h, s.w); }

void check_image(const char* op, const Tensor& x) {
    if (!x.defined()) fail(op, "input must be a defined tensor");
    if (x.dim() != 4) fail(op, fmt::format("expects an input (N, C, H, W), got {}", shape_str(x.shape())));
}

namespace {

// Output extent along one axis (PyTorch's pooling_output_shape for pooling).
std::size_t out_extent(std::size_t in, std::size_t k, std::size_t s, std::size_t p, std::size_t d, bool ceil_mode) {
    const std::size_t span = d * (k - 1) + 1, padded = in + 2 * p;  // the dilated kernel, the padded input
    if (span > padded) return 0;
    std::size_t out = (padded - span + (ceil_mode ? s - 1 : 0)) / s + 1;
    // A ceil_mode window must start inside the input or its left padding.
    if (ceil_mode && (out - 1) * s >= in + p) --out;
    return out;
}

}  // namespace

Window2d make_window(const char* op, const Shape& x, Size2 kernel, Size2 stride, Size2 padding, Size2 dilation,
                     bool ceil_mode, bool pooling) {
    const auto bad = [&](const char* what, Size2 v, const char* rule) {
        fail(op, fmt::format("{} must be {}, got {} (input {})", what, rule, size2_str(v), shape_str(x)));
    };
    if (kernel.h <= 0 || kernel.w <= 0) bad("kernel_size", kernel, "positive");
    if (stride.h <= 0 || stride.w <= 0) bad("stride", stride, "positive");
    if (dilation.h <= 0 || dilation.w <= 0) bad("dilation", dilation, "positive");
    if (padding.h < 0 || padding.w < 0) bad("padding", padding, "non-negative");
    if (pooling && (2 * padding.h > kernel.h || 2 * padding.w > kernel.w)) {
        fail(op, fmt::format("padding {} must be at most half of kernel_size {} (input {})", size2_str(padding),
                             size2_str(kernel), shape_str(x)));
    }
    Window2d w;
    w.kh = static_cast<std::size_t>(kernel.h), w.kw = static_cast<std::size_t>(kernel.w);
    w.sh = static_cast<std::size_t>(stride.h), w.sw = static_cast<std::size_t>(stride.w);
    w.ph = static_cast<std::size_t>(padding.h), w.pw = static_cast<std::size_t>(padding.w);
    w.dh = static_cast<std::size_t>(dilation.h), w.dw = static_cast<std::size_t>(dilation.w);
    w.H = x[x.size() - 2], w.W = x.back();
    w.OH = out_extent(w.H, w.kh, w.sh, w.ph, w.dh, ceil_mode);
    w.OW = out_extent(w.W, w.kw, w.sw, w.pw, w.dw, ceil_mode);
    if (w.OH == 0 || w.OW == 0) {
        fail(op, fmt::format("the window (kernel_size {}, dilation {}) does not fit in the padded input {} x {} "
                             "(input {}, padding {})",
                             size2_str(kernel), size2_str(dilation), w.H + 2 * w.ph, w.W + 2 * w.pw, shape_str(x),
                             size2_str(padding)));
    }
    return w;
}

}  // namespace xg::nn::detail
