// softmax and log_softmax along one axis, shifted by the row maximum so logits of +-1000 work.
// The kernels: core/reference/softmax.cpp (the formulas of docs/autograd.md, section 7) and
// core/fast/softmax.cpp (the same with the rows shared between threads), chosen per call by
// xg::kernel_tier().
#include "core/engine/kernel_tier.hpp"
#include "core/fast/softmax.hpp"
#include "core/ops/axis_view.hpp"
#include "core/ops/ops.hpp"
#include "core/reference/softmax.hpp"

namespace xg {

Tensor softmax(const Tensor& a, int axis) {
    const Shape s = a.shape();
    if (s.empty()) fail("softmax", "needs at least a 1-D tensor");
    const AxisView v = axis_view(s, normalize_axis(axis, s.size(), "softmax"));
    Array out = empty_like(a.value());
    detail::by_tier(reference::softmax_forward, fast::softmax_forward, a.value().data(), out.data(), v.outer, v.len, v.inner);
    // d softmax: g_in = y * (g - sum_j g_j y_j) per row
    return record("softmax", std::move(out), {a}, [v](const GradContext& c) -> Grads {
        // fast first-order path, kept because the numbers demand it: one pass per row instead of
        // four tensor-sized ops, the Pre-LN block took 8 % longer without it (docs/performance.md)
        Array g = empty_like(c.grad);
        detail::by_tier(reference::softmax_backward, fast::softmax_backward, c.output().data(), c.grad.data(), g.data(),
                        v.outer, v.len, v.inner);
        return {std::move(g)};
    }, {}, [axis](const BackwardContext& c) -> std::vector<Tensor> {
        const Tensor y = c.output();
        return {y * (c.grad - sum(c.grad * y, Axes{axis}, true))};
    });
}

Tensor log_softmax(const Tensor& a, int axis) {
    const Shape s = a.shape();
    if (s.empty()) fail("log_softmax", "needs at least a 1-D tensor");
    const AxisView v = axis_view(s, normalize_axis(axis, s.size(), "log_softmax"));
    Array out = empty_like(a.value());
    detail::by_tier(reference::log_softmax_forward, fast::log_softmax_forward, a.value().data(), out.data(), v.outer, v.len,
                        v.inner);
    // d log_softmax: g_in = g - softmax * sum_j g_j per row (softmax = exp(out))
    return record("log_softmax", std::move(out), {a}, [v](const GradContext& c) -> Grads {
        // fast first-order path, kept for the same reason as softmax's (docs/performance.md)
        Array g = empty_like(c.grad);
        detail::by_tier(reference::log_softmax_backward, fast::log_softmax_backward, c.output().data(), c.grad.data(),
                        g.data(), v.outer, v.len, v.inner);
        return {std::move(g)};
    }, {}, [axis](const BackwardContext& c) -> std::vector<Tensor> {
        return {c.grad - exp(c.output()) * sum(c.grad, Axes{axis}, true)};
    });
}

}  // namespace xg
