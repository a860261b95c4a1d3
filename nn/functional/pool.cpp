// max_pool2d and avg_pool2d as one graph node each. Derivation of the backwards:
// docs/derivations/pool2d.md; the kernels: nn/reference/pool.cpp and nn/fast/pool.cpp, chosen per
// call by xg::kernel_tier(). The nodes are templates on the storage type T: float for a float32 x
// (the kernels read and write its float32 storage: no float64 mirror), double otherwise. The composed twins take
// max / mean over `unfold`'s windows; adaptive_avg_pool2d is composed only (a mean per cell).
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "core/ops/composed_backward.hpp"
#include "core/ops/linear_map.hpp"
#include "nn/fast/pool.hpp"
#include "nn/functional/kernel_storage.hpp"
#include "nn/functional/pool.hpp"
#include "nn/functional/tier.hpp"
#include "nn/functional/window.hpp"
#include "nn/reference/pool.hpp"

namespace xg::nn::functional {

namespace {

using detail::Window2d;

Window2d check_pool(const char* op, const Tensor& x, Size2 kernel, std::optional<Size2> stride, Size2 padding,
                    Size2 dilation, bool ceil_mode) {
    detail::check_image(op, x);
    return detail::make_window(op, x.shape(), kernel, stride.value_or(kernel), padding, dilation, ceil_mode, true);
}

std::size_t planes(const Tensor& x) { return x.size(0) * x.size(1); }

std::vector<detail::AvgCell> avg_cells(const Window2d& w, bool count_include_pad) {
    std::vector<detail::AvgCell> cells;
    for (std::size_t oh = 0; oh < w.OH; ++oh) {
        for (std::size_t ow = 0; ow < w.OW; ++ow) cells.push_back(detail::avg_cell(w, oh, ow, count_include_pad));
    }
    return cells;
}

// The composed twins' input: padded with `value` on every side, plus what a ceil_mode window
// hangs past the padding on the bottom and right, so that unfold without padding sees every window.
Tensor pad_for_windows(const Tensor& x, const Window2d& w, double value) {
    const std::size_t need_h = (w.OH - 1) * w.sh + w.dh * (w.kh - 1) + 1, need_w = (w.OW - 1) * w.sw + w.dw * (w.kw - 1) + 1;
    const std::size_t extra_h = need_h > w.H + 2 * w.ph ? need_h - (w.H + 2 * w.ph) : 0;
    const std::size_t extra_w = need_w > w.W + 2 * w.pw ? need_w - (w.W + 2 * w.pw) : 0;
    return pad(x, {w.pw, w.pw + extra_w, w.ph, w.ph + extra_h}, value);
}

// (N, C, KH KW, OH, OW): every window's elements along axis 2.
Tensor windows(const Tensor& padded, const Tensor& x, const Window2d& w, Size2 kernel, Size2 stride, Size2 dilation) {
    const auto l = [](std::size_t v) { return static_cast<long>(v); };
    const Tensor columns = unfold(padded, kernel, dilation, 0, stride);
    return reshape(columns, {l(x.size(0)), l(x.size(1)), l(w.kernel_area()), l(w.OH), l(w.OW)});
}

}  // namespace

namespace {

// An output array of storage type T (uninitialized).
template <class T>
xt::xarray<T> pool_output(const Shape& shape) {
    if constexpr (std::is_same_v<T, double>) {
        return empty_array(shape);
    } else {
        return xt::xarray<T>::from_shape(shape);
    }
}

// max_pool2d's node for storage type T (kernel_storage.hpp): float for a float32 x (the kernels
// read and write its float32 storage: no float64 mirror), double otherwise.
template <class T>
MaxPoolResult max_pool2d_node(const Tensor& x, const Window2d& w) {
    using detail::kernel_grad;
    using detail::kernel_values;
    const Shape out_shape{x.size(0), x.size(1), w.OH, w.OW};
    xt::xarray<T> y = pool_output<T>(out_shape);
    IndexArray at = IndexArray::from_shape(out_shape);
    detail::by_tier(reference::max_pool2d_forward<T>, fast::max_pool2d_forward<T>, kernel_values<T>(x).data(), planes(x), w, y.data(),
                    at.data());
    const std::size_t plane_in = w.H * w.W, plane_out = w.out_area(), n_planes = planes(x);
    // dx[plane][at] += dy: each output's gradient goes to the one element that won
    auto winners = std::make_shared<const IndexArray>(at);  // shared by both backwards
    Tensor out = record("max_pool2d", std::move(y), {x}, [winners, w, n_planes](const GradContext& c) -> Grads {
        xt::xarray<T> dx = xt::zeros<T>(c.input_shape(0));
        detail::by_tier(reference::max_pool2d_backward<T>, fast::max_pool2d_backward<T>, winners->data(), kernel_grad<T>(c).data(),
                        n_planes, w, dx.data());
        return grads_of(std::move(dx));
    }, {{"indices", out_shape}}, [winners, plane_in, plane_out, out_shape](const BackwardContext& c) -> std::vector<Tensor> {
        const IndexArray& at = *winners;
        // create_graph: the same routing to the winners as a graph node (its backward reads them again)
        auto m = std::make_shared<FlatGather>(FlatGather{"max_pool2d", c.input_shape(0), out_shape, std::vector<std::size_t>(at.size())});
        for (std::size_t o = 0; o < at.size(); ++o) {
            m->offsets[o] = at.data()[o] < 0 ? FlatGather::kNoSource : (o / plane_out) * plane_in + static_cast<std::size_t>(at.data()[o]);
        }
        return {scatter_in_graph(c.grad, std::move(m))};
    });
    return {out, at};
}

// avg_pool2d's node for storage type T, as max_pool2d_node.
template <class T>
Tensor avg_pool2d_node(const Tensor& x, const Window2d& w, Size2 kernel_size, std::optional<Size2> stride, Size2 padding,
                       bool ceil_mode, bool count_include_pad) {
    using detail::kernel_grad;
    using detail::kernel_values;
    xt::xarray<T> y = pool_output<T>({x.size(0), x.size(1), w.OH, w.OW});
    const std::size_t n_planes = planes(x);
    detail::by_tier(reference::avg_pool2d_forward<T>, fast::avg_pool2d_forward<T>, kernel_values<T>(x).data(), n_planes, w,
                    count_include_pad, y.data());
    // dx[window of o] += dy[o] / divisor[o]
    return record("avg_pool2d", std::move(y), {x}, [w, n_planes, count_include_pad](const GradContext& c) -> Grads {
        xt::xarray<T> dx = xt::zeros<T>(c.input_shape(0));
        detail::by_tier(reference::avg_pool2d_backward<T>, fast::avg_pool2d_backward<T>, kernel_grad<T>(c).data(), n_planes, w,
                        count_include_pad, dx.data());
        return grads_of(std::move(dx));
    }, {}, through_composed([kernel_size, stride, padding, ceil_mode, count_include_pad](const std::vector<Tensor>& in) {
        return avg_pool2d_composed(in[0], kernel_size, stride, padding, ceil_mode, count_include_pad);  // create_graph
    }));
}

}  // namespace

MaxPoolResult max_pool2d_with_indices(const Tensor& x, Size2 kernel_size, std::optional<Size2> stride, Size2 padding,
                                      Size2 dilation, bool ceil_mode) {
    const Window2d w = check_pool("max_pool2d", x, kernel_size, stride, padding, dilation, ceil_mode);
    return with_storage_type(x.dtype(), [&](auto storage) { return max_pool2d_node<typename decltype(storage)::type>(x, w); });
}

Tensor max_pool2d(const Tensor& x, Size2 kernel_size, std::optional<Size2> stride, Size2 padding, Size2 dilation,
                  bool ceil_mode) {
    return max_pool2d_with_indices(x, kernel_size, stride, padding, dilation, ceil_mode).output;
}

Tensor max_pool2d_composed(const Tensor& x, Size2 kernel_size, std::optional<Size2> stride, Size2 padding,
                           Size2 dilation, bool ceil_mode) {
    const Window2d w = check_pool("max_pool2d_composed", x, kernel_size, stride, padding, dilation, ceil_mode);
    const Tensor padded = pad_for_windows(x, w, -std::numeric_limits<double>::infinity());
    return max(windows(padded, x, w, kernel_size, stride.value_or(kernel_size), dilation), {2});
}

Tensor avg_pool2d(const Tensor& x, Size2 kernel_size, std::optional<Size2> stride, Size2 padding, bool ceil_mode,
                  bool count_include_pad) {
    const Window2d w = check_pool("avg_pool2d", x, kernel_size, stride, padding, 1, ceil_mode);
    return with_storage_type(x.dtype(), [&](auto storage) {
        return avg_pool2d_node<typename decltype(storage)::type>(x, w, kernel_size, stride, padding, ceil_mode, count_include_pad);
    });
}

Tensor avg_pool2d_composed(const Tensor& x, Size2 kernel_size, std::optional<Size2> stride, Size2 padding,
                           bool ceil_mode, bool count_include_pad) {
    const Window2d w = check_pool("avg_pool2d_composed", x, kernel_size, stride, padding, 1, ceil_mode);
    Array divisors = Array::from_shape({w.OH, w.OW});
    const std::vector<detail::AvgCell> cells = avg_cells(w, count_include_pad);
    for (std::size_t o = 0; o < cells.size(); ++o) divisors.data()[o] = cells[o].divisor;
    const Tensor padded = pad_for_windows(x, w, 0.0);
    return sum(windows(padded, x, w, kernel_size, stride.value_or(kernel_size), 1), {2}) / Tensor(divisors, x.dtype());
}

Tensor adaptive_avg_pool2d(const Tensor& x, Size2 output_size) {
    detail::check_image("adaptive_avg_pool2d", x);
    if (output_size.h <= 0 || output_size.w <= 0) {
        fail("adaptive_avg_pool2d", fmt::format("output_size must be positive, got {} (input {})", detail::size2_str(output_size),
                                                shape_str(x.shape())));
    }
    const std::size_t H = x.size(2), W = x.size(3), OH = static_cast<std::size_t>(output_size.h),
                      OW = static_cast<std::size_t>(output_size.w);
    if (H == 0 || W == 0) fail("adaptive_avg_pool2d", fmt::format("input {} has an empty plane", shape_str(x.shape())));
    if (OH == 1 && OW == 1) return mean(x, {2, 3}, true);  // global average pooling
    std::vector<Tensor> cells;  // (N, C) each, row-major over (OH, OW)
    for (std::size_t i = 0; i < OH; ++i) {
        const std::size_t r0 = i * H / OH, r1 = ((i + 1) * H + OH - 1) / OH;  // floor(i H / OH), ceil((i + 1) H / OH)
        for (std::size_t j = 0; j < OW; ++j) {
            const std::size_t q0 = j * W / OW, q1 = ((j + 1) * W + OW - 1) / OW;
            cells.push_back(mean(narrow(narrow(x, 2, r0, r1 - r0), 3, q0, q1 - q0), {2, 3}));
        }
    }
    const auto l = [](std::size_t v) { return static_cast<long>(v); };
    return reshape(stack(cells, 2), {l(x.size(0)), l(x.size(1)), l(OH), l(OW)});
}

}  // namespace xg::nn::functional
