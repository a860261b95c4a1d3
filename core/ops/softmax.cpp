// softmax and log_softmax along one axis, shifted by the row maximum so logits of +-1000 work.
// The kernels: core/reference/softmax.cpp (the formulas of docs/autograd.md, section 7) and
// core/fast/softmax.cpp (the same with the rows shared between threads), chosen per call by
// xg::kernel_tier(). A float32 tensor runs the kernels on its float32 storage (double arithmetic
// within a row, each result rounded once): no float64 mirror, forward or first-order backward.
#include <type_traits>

#include "core/engine/kernel_tier.hpp"
#include "core/fast/softmax.hpp"
#include "core/ops/axis_view.hpp"
#include "core/ops/ops.hpp"
#include "core/reference/softmax.hpp"

namespace xg {

namespace {

// The kernels of one op (softmax or log_softmax) for storage T.
template <class T>
struct RowKernels {
    using Forward = void(const T*, T*, std::size_t, std::size_t, std::size_t);
    using Backward = void(const T*, const T*, T*, std::size_t, std::size_t, std::size_t);
    Forward &reference_forward, &fast_forward;
    Backward &reference_backward, &fast_backward;
};

template <class T>
RowKernels<T> softmax_kernels() {
    return {reference::softmax_forward<T>, fast::softmax_forward<T>, reference::softmax_backward<T>, fast::softmax_backward<T>};
}
template <class T>
RowKernels<T> log_softmax_kernels() {
    return {reference::log_softmax_forward<T>, fast::log_softmax_forward<T>, reference::log_softmax_backward<T>,
            fast::log_softmax_backward<T>};
}

// Records op `name` on a's storage T: the forward kernel, and a first-order kernel backward kept
// because the numbers demand it (one pass per row instead of four tensor-sized ops: the Pre-LN
// block took 8 % longer without it, docs/performance.md); `in_graph` is the create_graph backward.
template <class T>
Tensor row_op(const char* name, const Tensor& a, const AxisView& v, RowKernels<T> (*kernels)(), Backward in_graph) {
    const xt::xarray<T>& x = a.values<T>();
    xt::xarray<T> out;
    if constexpr (std::is_same_v<T, float>) out = FloatArray::from_shape(x.shape());
    else out = empty_like(x);
    const RowKernels<T> k = kernels();
    detail::by_tier(k.reference_forward, k.fast_forward, x.data(), out.data(), v.outer, v.len, v.inner);
    return record(name, std::move(out), {a}, [v, kernels](const GradContext& c) -> Grads {
        const RowKernels<T> k = kernels();
        if constexpr (std::is_same_v<T, float>) {
            const FloatArray& g = c.grad32();
            FloatArray dx = FloatArray::from_shape(g.shape());
            detail::by_tier(k.reference_backward, k.fast_backward, c.output32().data(), g.data(), dx.data(), v.outer, v.len, v.inner);
            return grads_of(std::move(dx));
        } else {
            Array dx = empty_like(c.grad);
            detail::by_tier(k.reference_backward, k.fast_backward, c.output().data(), c.grad.data(), dx.data(), v.outer, v.len,
                            v.inner);
            return grads_of(std::move(dx));
        }
    }, {}, std::move(in_graph));
}

}  // namespace

Tensor softmax(const Tensor& a, int axis) {
    const Shape s = a.shape();
    if (s.empty()) fail("softmax", "needs at least a 1-D tensor");
    const AxisView v = axis_view(s, normalize_axis(axis, s.size(), "softmax"));
    // d softmax: g_in = y * (g - sum_j g_j y_j) per row
    Backward in_graph = [axis](const BackwardContext& c) -> std::vector<Tensor> {
        const Tensor y = c.output();
        return {y * (c.grad - sum(c.grad * y, Axes{axis}, true))};
    };
    if (a.dtype() == kFloat32) return row_op<float>("softmax", a, v, softmax_kernels<float>, std::move(in_graph));
    return row_op<double>("softmax", a, v, softmax_kernels<double>, std::move(in_graph));
}

Tensor log_softmax(const Tensor& a, int axis) {
    const Shape s = a.shape();
    if (s.empty()) fail("log_softmax", "needs at least a 1-D tensor");
    const AxisView v = axis_view(s, normalize_axis(axis, s.size(), "log_softmax"));
    // d log_softmax: g_in = g - softmax * sum_j g_j per row (softmax = exp(out))
    Backward in_graph = [axis](const BackwardContext& c) -> std::vector<Tensor> {
        return {c.grad - exp(c.output()) * sum(c.grad, Axes{axis}, true)};
    };
    if (a.dtype() == kFloat32) return row_op<float>("log_softmax", a, v, log_softmax_kernels<float>, std::move(in_graph));
    return row_op<double>("log_softmax", a, v, log_softmax_kernels<double>, std::move(in_graph));
}

}  // namespace xg
