// softmax and log_softmax along one axis, shifted by the row maximum so logits of +-1000 work.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/ops/axis_view.hpp"
#include "core/ops/ops.hpp"
#include "core/fast/parallel.hpp"

namespace xg {

namespace {

// Calls f(base) for the first element of every row along the axis. Rows are independent, so the
// outer blocks are shared between threads (core/fast/parallel.hpp).
template <class F>
void for_each_row(const AxisView& v, F&& f) {
    detail::parallel_for(v.outer, v.len * v.inner, [&](std::size_t o0, std::size_t o1) {
        for (std::size_t o = o0; o < o1; ++o) {
            for (std::size_t i = 0; i < v.inner; ++i) f(o * v.len * v.inner + i);
        }
    });
}

// The largest element of the row starting at `base` (the shift that keeps exp from overflowing).
double row_max(const double* x, std::size_t base, const AxisView& v) {
    double m = -std::numeric_limits<double>::infinity();
    for (std::size_t j = 0; j < v.len; ++j) m = std::max(m, x[base + j * v.inner]);
    return m;
}

// out = (x - max) - log(sum(exp(x - max))) per row.
Array log_softmax_forward(const Array& x, const AxisView& v) {
    Array out = empty_like(x);
    const double* px = x.data();
    double* po = out.data();
    for_each_row(v, [&](std::size_t base) {
        const double m = row_max(px, base, v);
        double s = 0.0;
        for (std::size_t j = 0; j < v.len; ++j) s += std::exp(px[base + j * v.inner] - m);
        // (x - max) - log(s), not x - (max + log(s)): rounding max + log(s) at |x| ~ 1000 costs ~1e-13.
        const double log_s = std::log(s);
        for (std::size_t j = 0; j < v.len; ++j) po[base + j * v.inner] = (px[base + j * v.inner] - m) - log_s;
    });
    return out;
}

// out = exp(x - max) / sum(exp(x - max)) per row. Not exp(log_softmax): subtracting the
// log-sum-exp at |x| ~ 1000 costs ulp(1000) ~ 1e-13 relative, while x - max is exact nearby.
Array softmax_forward(const Array& x, const AxisView& v) {
    Array out = empty_like(x);
    const double* px = x.data();
    double* po = out.data();
    for_each_row(v, [&](std::size_t base) {
        const double m = row_max(px, base, v);
        double s = 0.0;
        for (std::size_t j = 0; j < v.len; ++j) {
            const std::size_t k = base + j * v.inner;
            po[k] = std::exp(px[k] - m);
            s += po[k];
        }
        for (std::size_t j = 0; j < v.len; ++j) po[base + j * v.inner] /= s;
    });
    return out;
}

}  // namespace

Tensor softmax(const Tensor& a, int axis) {
    const Shape s = a.shape();
    if (s.empty()) fail("softmax", "needs at least a 1-D tensor");
    const AxisView v = axis_view(s, normalize_axis(axis, s.size(), "softmax"));
    Array out = softmax_forward(a.value(), v);
    // d softmax: g_in = y * (g - sum_j g_j y_j) per row
    return record("softmax", std::move(out), {a}, [v](const GradContext& c) -> Grads {
        // fast first-order path, kept because the numbers demand it: one pass per row instead of
        // four tensor-sized ops, the Pre-LN block took 8 % longer without it (docs/performance.md)
        Array g = empty_like(c.grad);
        const double *py = c.output().data(), *pg = c.grad.data();
        double* pr = g.data();
        for_each_row(v, [&](std::size_t base) {
            double dot = 0.0;
            for (std::size_t j = 0; j < v.len; ++j) dot += pg[base + j * v.inner] * py[base + j * v.inner];
            for (std::size_t j = 0; j < v.len; ++j) {
                const std::size_t k = base + j * v.inner;
                pr[k] = py[k] * (pg[k] - dot);
            }
        });
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
    // d log_softmax: g_in = g - softmax * sum_j g_j per row (softmax = exp(out))
    return record("log_softmax", log_softmax_forward(a.value(), v), {a}, [v](const GradContext& c) -> Grads {
        // fast first-order path, kept for the same reason as softmax's (docs/performance.md)
        Array g = empty_like(c.grad);
        const double *py = c.output().data(), *pg = c.grad.data();
        double* pr = g.data();
        for_each_row(v, [&](std::size_t base) {
            double total = 0.0;
            for (std::size_t j = 0; j < v.len; ++j) total += pg[base + j * v.inner];
            for (std::size_t j = 0; j < v.len; ++j) {
                const std::size_t k = base + j * v.inner;
                pr[k] = pg[k] - std::exp(py[k]) * total;
            }
        });
        return {std::move(g)};
    }, {}, [axis](const BackwardContext& c) -> std::vector<Tensor> {
        return {c.grad - exp(c.output()) * sum(c.grad, Axes{axis}, true)};
    });
}

}  // namespace xg
