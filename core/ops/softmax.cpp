// softmax and log_softmax along one axis, shifted by the row maximum so logits of +-1000 work.
// The kernels: core/reference/softmax.cpp (the formulas of docs/autograd.md, section 7) and
// core/fast/softmax.cpp (the same with the rows shared between threads), chosen per call by
// xg::kernel_tier(), on the tensor's own storage (a float32 row is computed in double and each
// result rounded once: no float64 mirror).
//
// Each derivative is written once: softmax's backward is the op softmax_backward(y, g), whose
// forward is the kernel of the formula; a first-order backward runs it unrecorded, create_graph
// records it, and its own backward (the derivative of the formula) sits under it.
#include "core/engine/kernel_tier.hpp"
#include "core/fast/softmax.hpp"
#include "core/fast/strided.hpp"
#include "core/ops/axis_view.hpp"
#include "core/ops/ops.hpp"
#include "core/reference/softmax.hpp"

namespace xg {

namespace {

template <class T>
using RowKernel = void(const T*, T*, std::size_t, std::size_t, std::size_t);
template <class T>
using RowGradientKernel = void(const T*, const T*, T*, std::size_t, std::size_t, std::size_t);

// out = kernel(x) row by row, on x's storage T, by the kernel tier.
template <class T>
xt::xarray<T> per_row(RowKernel<T>& reference, RowKernel<T>& fast, const xt::xarray<T>& x, const AxisView& v) {
    xt::xarray<T> out = empty_storage<T>(x.shape());
    detail::by_tier(reference, fast, x.data(), out.data(), v.outer, v.len, v.inner);
    return out;
}

// out = kernel(y, g) row by row, on their storage T, by the kernel tier.
template <class T>
xt::xarray<T> per_row(RowGradientKernel<T>& reference, RowGradientKernel<T>& fast, const xt::xarray<T>& y,
                      const xt::xarray<T>& g, const AxisView& v) {
    xt::xarray<T> out = empty_storage<T>(g.shape());
    detail::by_tier(reference, fast, y.data(), g.data(), out.data(), v.outer, v.len, v.inner);
    return out;
}

AxisView rows_along(const Tensor& a, int axis, const char* op) {
    const Shape s = a.shape();
    if (s.empty()) fail(op, "needs at least a 1-D tensor");
    return axis_view(s, normalize_axis(axis, s.size(), op));
}

// g_in = y * (g - sum_j g_j y_j) per row: the gradient of y = softmax(x), as an op of (y, g)
Tensor softmax_backward(const Tensor& y, const Tensor& g, int axis) {
    const AxisView v = rows_along(g, axis, "softmax_backward");
    return on_storage(y, g, [&](const auto& ys, const auto& gs) {
        using T = typename std::decay_t<decltype(gs)>::value_type;
        // d/dg: h -> softmax_backward(y, h); d/dy: h -> h * (g - sum(g y)) - g * sum(h y)
        return record("softmax_backward", per_row<T>(reference::softmax_backward<T>, fast::softmax_backward<T>, ys, gs, v), {y, g},
                      [axis](const BackwardContext& c) -> std::vector<Tensor> {
                          const Tensor y = c.input(0), g = c.input(1);
                          return {c.needs_grad(0) ? c.grad * (g - sum(g * y, Axes{axis}, true)) - g * sum(c.grad * y, Axes{axis}, true)
                                                  : Tensor(),
                                  c.needs_grad(1) ? softmax_backward(y, c.grad, axis) : Tensor()};
                      });
    });
}

// g_in = g - exp(l) * sum_j g_j per row: the gradient of l = log_softmax(x), as an op of (l, g)
Tensor log_softmax_backward(const Tensor& l, const Tensor& g, int axis) {
    const AxisView v = rows_along(g, axis, "log_softmax_backward");
    return on_storage(l, g, [&](const auto& ls, const auto& gs) {
        using T = typename std::decay_t<decltype(gs)>::value_type;
        // d/dg: h -> h - sum(h exp(l)); d/dl: h -> -h exp(l) sum(g)
        return record("log_softmax_backward",
                      per_row<T>(reference::log_softmax_backward<T>, fast::log_softmax_backward<T>, ls, gs, v), {l, g},
                      [axis](const BackwardContext& c) -> std::vector<Tensor> {
                          const Tensor l = c.input(0), g = c.input(1);
                          return {c.needs_grad(0) ? -(c.grad * exp(l)) * sum(g, Axes{axis}, true) : Tensor(),
                                  c.needs_grad(1) ? c.grad - sum(c.grad * exp(l), Axes{axis}, true) : Tensor()};
                      });
    });
}

}  // namespace

Tensor softmax(const Tensor& a, int axis) {
    const AxisView v = rows_along(a, axis, "softmax");
    return on_storage(a, [&](const auto& x) {
        using T = typename std::decay_t<decltype(x)>::value_type;
        // d softmax: g_in = softmax_backward(y, g) = y * (g - sum_j g_j y_j) per row
        return record("softmax", per_row<T>(reference::softmax_forward<T>, fast::softmax_forward<T>, x, v), {a},
                      [axis](const BackwardContext& c) -> std::vector<Tensor> { return {softmax_backward(c.output(), c.grad, axis)}; });
    });
}

Tensor log_softmax(const Tensor& a, int axis) {
    const AxisView v = rows_along(a, axis, "log_softmax");
    return on_storage(a, [&](const auto& x) {
        using T = typename std::decay_t<decltype(x)>::value_type;
        // d log_softmax: g_in = log_softmax_backward(l, g) = g - exp(l) * sum_j g_j per row
        return record("log_softmax", per_row<T>(reference::log_softmax_forward<T>, fast::log_softmax_forward<T>, x, v), {a},
                      [axis](const BackwardContext& c) -> std::vector<Tensor> {
                          return {log_softmax_backward(c.output(), c.grad, axis)};
                      });
    });
}

}  // namespace xg
