// conv2d as one graph node. Derivation of the backward: docs/derivations/conv2d.md. The kernels:
// nn/reference/conv.cpp (the sums as direct loops) and nn/fast/conv.cpp (im2col + GEMM per sample
// and group), chosen per call by xg::kernel_tier(). The composed twin, unfold and pad are built
// from core ops. The node is a template on the storage type T: float when x, weight and bias are all
// float32 (the kernels read and write their float32 storage: no float64 mirror), double otherwise.
#include <algorithm>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "core/ops/composed_backward.hpp"
#include "nn/fast/conv.hpp"
#include "nn/functional/affine.hpp"
#include "nn/functional/kernel_storage.hpp"
#include "nn/functional/tier.hpp"
#include "nn/functional/window.hpp"
#include "nn/reference/conv.hpp"

namespace xg::nn::functional {

namespace {

using detail::ConvDims;
using detail::Window2d;

ConvDims check_conv2d(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias, Size2 stride,
                      Size2 padding, Size2 dilation, std::int64_t groups) {
    if (!x.defined() || !weight.defined()) fail(op, "input and weight must be defined tensors");
    const Shape sx = x.shape(), sw = weight.shape();
    if (sx.size() != 4) fail(op, fmt::format("expects an input (N, C, H, W), got {} (weight {})", shape_str(sx), shape_str(sw)));
    if (sw.size() != 4) {
        fail(op, fmt::format("weight must be 4-D (out_channels, in_channels / groups, KH, KW), got {} (input {})",
                             shape_str(sw), shape_str(sx)));
    }
    if (groups <= 0) fail(op, fmt::format("groups must be positive, got {} (input {}, weight {})", groups, shape_str(sx), shape_str(sw)));
    ConvDims d;
    d.G = static_cast<std::size_t>(groups);
    if (sx[1] != sw[1] * d.G) {
        fail(op, fmt::format("input {} has {} channels but weight {} with groups = {} expects {} (weight's axis 1 times groups)",
                             shape_str(sx), sx[1], shape_str(sw), d.G, sw[1] * d.G));
    }
    if (sw[0] % d.G != 0) {
        fail(op, fmt::format("out_channels {} of weight {} is not divisible by groups = {}", sw[0], shape_str(sw), d.G));
    }
    if (bias.defined() && bias.shape() != Shape{sw[0]}) {
        fail(op, fmt::format("bias must have shape ({},) to match weight {}, got {}", sw[0], shape_str(sw), shape_str(bias.shape())));
    }
    const auto k = [](std::size_t v) { return static_cast<std::int64_t>(v); };
    d.win = detail::make_window(op, sx, Size2(k(sw[2]), k(sw[3])), stride, padding, dilation);
    d.N = sx[0], d.C = sx[1], d.O = sw[0], d.Cg = sw[1], d.Og = d.O / d.G;
    d.K = d.Cg * d.win.kernel_area(), d.L = d.win.out_area();
    return d;
}

// The node for storage type T (kernel_storage.hpp: kernel_values, kernel_input, kernel_grad).
template <class T>
Tensor conv2d_node(const Tensor& x, const Tensor& weight, const Tensor& bias, Size2 stride, Size2 padding, Size2 dilation,
                   std::int64_t groups, const ConvDims& d) {
    using detail::kernel_grad;
    using detail::kernel_input;
    using detail::kernel_values;
    const Shape y_shape{d.N, d.O, d.win.OH, d.win.OW};
    xt::xarray<T> y;
    if constexpr (std::is_same_v<T, double>) {
        y = empty_array(y_shape);
    } else {
        y = xt::xarray<T>::from_shape(y_shape);
    }
    detail::by_tier(reference::conv2d_forward<T>, fast::conv2d_forward<T>, kernel_values<T>(x).data(), kernel_values<T>(weight).data(),
                    bias.defined() ? kernel_values<T>(bias).data() : nullptr, y.data(), d);

    std::vector<Tensor> inputs{x, weight};
    if (bias.defined()) inputs.push_back(bias);
    // dW_g = sum_n dy_g col_g^T, dx = col2im(W_g^T dy_g), db = sum of dy over N, OH, OW
    return record("conv2d", std::move(y), std::move(inputs), [d](const GradContext& c) -> Grads {
        Grads grads(c.num_inputs());
        const bool with_bias = c.num_inputs() > 2 && c.needs_grad(2);
        xt::xarray<T> dx, dw, db;
        if (c.needs_grad(0)) dx = xt::zeros<T>(c.input_shape(0));
        if (c.needs_grad(1)) dw = xt::zeros<T>(c.input_shape(1));
        if (with_bias) db = xt::zeros<T>({d.O});
        // x is read only for dW, W only for dx
        detail::by_tier(reference::conv2d_backward<T>, fast::conv2d_backward<T>, c.needs_grad(1) ? kernel_input<T>(c, 0).data() : nullptr,
                        c.needs_grad(0) ? kernel_input<T>(c, 1).data() : nullptr, kernel_grad<T>(c).data(),
                        c.needs_grad(0) ? dx.data() : nullptr, c.needs_grad(1) ? dw.data() : nullptr, with_bias ? db.data() : nullptr, d);
        if (c.needs_grad(0)) grads[0] = std::move(dx);
        if (c.needs_grad(1)) grads[1] = std::move(dw);
        if (with_bias) grads[2] = std::move(db);
        return grads;
    }, {}, through_composed([stride, padding, dilation, groups](const std::vector<Tensor>& in) {  // create_graph: the twin
        return conv2d_composed(in[0], in[1], in.size() > 2 ? in[2] : Tensor(), stride, padding, dilation, groups);
    }));
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Size2 stride, Size2 padding, Size2 dilation,
              std::int64_t groups) {
    const ConvDims d = check_conv2d("conv2d", x, weight, bias, stride, padding, dilation, groups);
    return detail::on_common_storage(x, {&weight, &bias}, [&](auto storage) {
        return conv2d_node<typename decltype(storage)::type>(x, weight, bias, stride, padding, dilation, groups, d);
    });
}

Tensor conv2d_composed(const Tensor& x, const Tensor& weight, const Tensor& bias, Size2 stride, Size2 padding,
                       Size2 dilation, std::int64_t groups) {
    const ConvDims d = check_conv2d("conv2d_composed", x, weight, bias, stride, padding, dilation, groups);
    const auto l = [](std::size_t v) { return static_cast<long>(v); };
    const Tensor columns = unfold(x, {l(d.win.kh), l(d.win.kw)}, dilation, padding, stride);  // (N, C K, L)
    std::vector<Tensor> per_group;  // (N, Og, L) each
    for (std::size_t g = 0; g < d.G; ++g) {
        const Tensor w_g = reshape(narrow(weight, 0, g * d.Og, d.Og), {l(d.Og), l(d.K)});
        per_group.push_back(matmul(w_g, narrow(columns, 1, g * d.K, d.K)));
    }
    Tensor y = reshape(d.G == 1 ? per_group[0] : cat(per_group, 1), {l(d.N), l(d.O), l(d.win.OH), l(d.win.OW)});
    return bias.defined() ? y + reshape(bias, {l(d.O), 1, 1}) : y;
}

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, std::int64_t stride, std::int64_t padding,
              std::int64_t dilation, std::int64_t groups) {
    if (!x.defined() || !weight.defined()) fail("conv1d", "input and weight must be defined tensors");
    const Shape sx = x.shape(), sw = weight.shape();
    if (sx.size() != 3 || sw.size() != 3) {
        fail("conv1d", fmt::format("expects an input (N, C, L) and a weight (out_channels, in_channels / groups, K), got {} and {}",
                                   shape_str(sx), shape_str(sw)));
    }
    const auto l = [](std::size_t v) { return static_cast<long>(v); };
    // A length-L signal is an image of height 1.
    const Tensor x2 = reshape(x, {l(sx[0]), l(sx[1]), 1, l(sx[2])});
    const Tensor w2 = reshape(weight, {l(sw[0]), l(sw[1]), 1, l(sw[2])});
    const ConvDims d = check_conv2d("conv1d", x2, w2, bias, {1, stride}, {0, padding}, {1, dilation}, groups);
    const Tensor y = conv2d(x2, w2, bias, {1, stride}, {0, padding}, {1, dilation}, groups);
    return reshape(y, {l(d.N), l(d.O), l(d.win.OW)});
}

Tensor unfold(const Tensor& x, Size2 kernel_size, Size2 dilation, Size2 padding, Size2 stride) {
    detail::check_image("unfold", x);
    const Window2d w = detail::make_window("unfold", x.shape(), kernel_size, stride, padding, dilation);
    const Tensor padded = w.ph + w.pw > 0 ? pad(x, {w.pw, w.pw, w.ph, w.ph}) : x;
    std::vector<Tensor> taps;  // per kernel offset (i, j): the (N, C, OH, OW) inputs it sees
    for (std::size_t i = 0; i < w.kh; ++i) {
        for (std::size_t j = 0; j < w.kw; ++j) {
            const Tensor rows = slice(padded, 2, i * w.dh, i * w.dh + w.sh * (w.OH - 1) + 1, w.sh);
            taps.push_back(slice(rows, 3, j * w.dw, j * w.dw + w.sw * (w.OW - 1) + 1, w.sw));
        }
    }
    const Shape s = x.shape();
    return reshape(stack(taps, 2), {static_cast<long>(s[0]), static_cast<long>(s[1] * w.kernel_area()),
                                    static_cast<long>(w.out_area())});
}

Tensor pad(const Tensor& x, const std::vector<std::size_t>& widths, double value) {
    if (!x.defined()) fail("pad", "input must be a defined tensor");
    if (widths.size() % 2 != 0 || widths.size() / 2 > x.dim()) {
        fail("pad", fmt::format("needs (before, after) pairs for at most {} axes of input {}, got {} values", x.dim(),
                                shape_str(x.shape()), widths.size()));
    }
    Tensor y = x;
    for (std::size_t k = 0; k < widths.size() / 2; ++k) {
        const std::size_t axis = x.dim() - 1 - k;  // pairs run from the last axis backwards
        const auto constant_block = [&](std::size_t width) {
            Shape s = y.shape();
            s[axis] = width;
            return full(s, value, x.dtype());  // x's dtype: a float64 block would make cat's result float64
        };
        std::vector<Tensor> parts;
        if (widths[2 * k] > 0) parts.push_back(constant_block(widths[2 * k]));
        parts.push_back(y);
        if (widths[2 * k + 1] > 0) parts.push_back(constant_block(widths[2 * k + 1]));
        if (parts.size() > 1) y = cat(parts, static_cast<int>(axis));
    }
    return y;
}

}  // namespace xg::nn::functional
