// Element-wise ops and NumPy broadcasting. Forward and backward side by side.
#include <cmath>

#include <fmt/format.h>

#include "core/ops.hpp"
#include "core/strided.hpp"

namespace xg {

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
    const std::size_t n = std::max(a.size(), b.size());
    Shape out(n);
    for (std::size_t i = 0; i < n; ++i) {
        const std::size_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
        const std::size_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
        if (da != db && da != 1 && db != 1) {
            fail(op, fmt::format("shapes {} and {} cannot be broadcast together (axis {}: {} vs {})", shape_str(a),
                                 shape_str(b), i, da, db));
        }
        out[i] = da == 1 ? db : da;
    }
    return out;
}

Array sum_to(const Array& grad, const Shape& shape) {
    if (Shape(grad.shape().begin(), grad.shape().end()) == shape) return grad;
    Array out = xt::zeros<double>(shape);
    if (out.size() == 1) {  // a scalar operand: one running sum, same order as the strided walk
        double total = 0.0;
        for (std::size_t i = 0, n = grad.size(); i < n; ++i) total += grad.data()[i];
        out.data()[0] = total;
        return out;
    }
    const Shape gshape(grad.shape().begin(), grad.shape().end());
    const Strides so = broadcast_strides(shape, gshape);
    const double* g = grad.data();
    double* o = out.data();
    for_each_index(gshape, so, [&](std::size_t i, std::size_t io) { o[io] += g[i]; });
    return out;
}

std::size_t normalize_axis(int axis, std::size_t ndim, const char* op) {
    const long n = static_cast<long>(ndim);
    if (axis < -n || axis >= n) fail(op, fmt::format("axis {} is out of range for a {}-D tensor", axis, ndim));
    return static_cast<std::size_t>(axis < 0 ? axis + n : axis);
}

namespace {

Shape shape_of(const Array& a) { return Shape(a.shape().begin(), a.shape().end()); }

// out = f(a, b) with broadcasting, as a plain strided loop (no broadcast expression).
template <class F>
Array broadcast_apply(const Array& a, const Array& b, const char* op, F f) {
    const Shape sa = shape_of(a), sb = shape_of(b);
    if (sa == sb) {
        Array out = empty_array(sa);
        const double *pa = a.data(), *pb = b.data();
        double* po = out.data();
        for (std::size_t i = 0, n = out.size(); i < n; ++i) po[i] = f(pa[i], pb[i]);
        return out;
    }
    // A one-element operand of no higher rank (x * 0.5, 1.0 - x): a plain loop with a constant.
    if (b.size() == 1 && sb.size() <= sa.size()) {
        Array out = empty_array(sa);
        const double *pa = a.data(), vb = b.data()[0];
        double* po = out.data();
        for (std::size_t i = 0, n = out.size(); i < n; ++i) po[i] = f(pa[i], vb);
        return out;
    }
    if (a.size() == 1 && sa.size() <= sb.size()) {
        Array out = empty_array(sb);
        const double va = a.data()[0], *pb = b.data();
        double* po = out.data();
        for (std::size_t i = 0, n = out.size(); i < n; ++i) po[i] = f(va, pb[i]);
        return out;
    }
    const Shape so = broadcast_shapes(sa, sb, op);
    Array out = empty_array(so);
    const Strides ta = broadcast_strides(sa, so), tb = broadcast_strides(sb, so);
    const double *pa = a.data(), *pb = b.data();
    double* po = out.data();
    for_each_index2(so, ta, tb, [&](std::size_t i, std::size_t ia, std::size_t ib) { po[i] = f(pa[ia], pb[ib]); });
    return out;
}

// g * f(x_i, y_i) over two same-shaped arrays (backward helpers).
template <class F>
Array zip_grad(const Array& g, const Array& x, F f) {
    Array out = empty_like(g);
    const double *pg = g.data(), *px = x.data();
    double* po = out.data();
    for (std::size_t i = 0, n = g.size(); i < n; ++i) po[i] = f(pg[i], px[i]);
    return out;
}

// Expands an input to the output's shape (for backward formulas that read it per element).
Array expand_to(const Array& a, const Shape& shape) {
    if (shape_of(a) == shape) return a;
    Array out = empty_array(shape);
    if (a.size() == 1) {
        out.fill(a.data()[0]);
        return out;
    }
    const Strides t = broadcast_strides(shape_of(a), shape);
    const double* pa = a.data();
    double* po = out.data();
    for_each_index(shape, t, [&](std::size_t i, std::size_t ia) { po[i] = pa[ia]; });
    return out;
}

// f(g_i, v_i) with v = `other` read as if broadcast to g's shape, without copying it when it
// already has that shape or is a single value.
template <class F>
Array zip_broadcast(const Array& g, const Array& other, F f) {
    if (shape_of(other) == shape_of(g)) return zip_grad(g, other, f);
    if (other.size() == 1 && other.dimension() <= g.dimension()) {
        const double v = other.data()[0];
        return map_elements(g, [&](double gi) { return f(gi, v); });
    }
    return zip_grad(g, expand_to(other, shape_of(g)), f);
}

// sum_to for a gradient the closure owns: moved, not copied, when no axis was broadcast.
Array reduce_to(Array&& g, const Shape& shape) {
    if (shape_of(g) == shape) return std::move(g);
    return sum_to(g, shape);
}

}  // namespace

// ---- binary -------------------------------------------------------------------------------

Tensor add(const Tensor& a, const Tensor& b) {
    Array out = broadcast_apply(a.value(), b.value(), "add", [](double x, double y) { return x + y; });
    // d(a+b)/da = 1, d(a+b)/db = 1, each summed over its broadcast axes
    return record("add", std::move(out), {a, b}, [](const GradContext& c) -> Grads {
        Grads g(2);
        if (c.needs_grad(0)) g[0] = sum_to(c.grad, c.input_shape(0));
        if (c.needs_grad(1)) g[1] = sum_to(c.grad, c.input_shape(1));
        return g;
    });
}

Tensor sub(const Tensor& a, const Tensor& b) {
    Array out = broadcast_apply(a.value(), b.value(), "sub", [](double x, double y) { return x - y; });
    // d(a-b)/da = 1, d(a-b)/db = -1
    return record("sub", std::move(out), {a, b}, [](const GradContext& c) -> Grads {
        Grads g(2);
        if (c.needs_grad(0)) g[0] = sum_to(c.grad, c.input_shape(0));
        if (c.needs_grad(1)) g[1] = reduce_to(map_elements(c.grad, [](double v) { return -v; }), c.input_shape(1));
        return g;
    });
}

Tensor mul(const Tensor& a, const Tensor& b) {
    Array out = broadcast_apply(a.value(), b.value(), "mul", [](double x, double y) { return x * y; });
    // d(ab)/da = b, d(ab)/db = a
    return record("mul", std::move(out), {a, b}, [](const GradContext& c) -> Grads {
        Grads g(2);
        const auto times = [](double gi, double v) { return gi * v; };
        if (c.needs_grad(0)) g[0] = reduce_to(zip_broadcast(c.grad, c.input(1), times), c.input_shape(0));
        if (c.needs_grad(1)) g[1] = reduce_to(zip_broadcast(c.grad, c.input(0), times), c.input_shape(1));
        return g;
    });
}

Tensor div(const Tensor& a, const Tensor& b) {
    Array out = broadcast_apply(a.value(), b.value(), "div", [](double x, double y) { return x / y; });
    // d(a/b)/da = 1/b, d(a/b)/db = -a/b^2 = -out/b
    return record("div", std::move(out), {a, b}, [](const GradContext& c) -> Grads {
        Grads g(2);
        if (c.needs_grad(0)) {
            g[0] = reduce_to(zip_broadcast(c.grad, c.input(1), [](double gi, double y) { return gi / y; }), c.input_shape(0));
        }
        if (c.needs_grad(1)) {
            // -g * out / b: out has g's shape, so fold it in first, then divide by b broadcast
            Array gb = zip_grad(c.grad, c.output(), [](double gi, double o) { return -gi * o; });
            g[1] = reduce_to(zip_broadcast(gb, c.input(1), [](double v, double y) { return v / y; }), c.input_shape(1));
        }
        return g;
    });
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, double b) { return add(a, scalar(b)); }
Tensor operator-(const Tensor& a, double b) { return sub(a, scalar(b)); }
Tensor operator*(const Tensor& a, double b) { return mul(a, scalar(b)); }
Tensor operator/(const Tensor& a, double b) { return div(a, scalar(b)); }
Tensor operator+(double a, const Tensor& b) { return add(scalar(a), b); }
Tensor operator-(double a, const Tensor& b) { return sub(scalar(a), b); }
Tensor operator*(double a, const Tensor& b) { return mul(scalar(a), b); }
Tensor operator/(double a, const Tensor& b) { return div(scalar(a), b); }
Tensor operator-(const Tensor& a) { return neg(a); }

// ---- unary --------------------------------------------------------------------------------

Tensor neg(const Tensor& a) {
    // d(-a)/da = -1
    return record("neg", map_elements(a.value(), [](double x) { return -x; }), {a}, [](const GradContext& c) -> Grads {
        return {map_elements(c.grad, [](double g) { return -g; })};
    });
}

Tensor pow(const Tensor& a, double p) {
    // d(a^p)/da = p a^(p-1); a^0 = 1 is constant, so 0 also at a = 0 (where 0 * 0^-1 is NaN), as PyTorch
    return record("pow", map_elements(a.value(), [p](double x) { return std::pow(x, p); }), {a}, [p](const GradContext& c) -> Grads {
        if (p == 0.0) return {Array(xt::zeros<double>(c.input_shape(0)))};
        return {zip_grad(c.grad, c.input(0), [p](double g, double x) { return g * p * std::pow(x, p - 1.0); })};
    });
}

Tensor exp(const Tensor& a) {
    // d(e^a)/da = e^a = out
    return record("exp", map_elements(a.value(), [](double x) { return std::exp(x); }), {a}, [](const GradContext& c) -> Grads {
        return {zip_grad(c.grad, c.output(), [](double g, double y) { return g * y; })};
    });
}

Tensor log(const Tensor& a) {
    // d(ln a)/da = 1/a
    return record("log", map_elements(a.value(), [](double x) { return std::log(x); }), {a}, [](const GradContext& c) -> Grads {
        return {zip_grad(c.grad, c.input(0), [](double g, double x) { return g / x; })};
    });
}

Tensor sqrt(const Tensor& a) {
    // d(sqrt a)/da = 1 / (2 sqrt a) = 1 / (2 out)
    return record("sqrt", map_elements(a.value(), [](double x) { return std::sqrt(x); }), {a}, [](const GradContext& c) -> Grads {
        return {zip_grad(c.grad, c.output(), [](double g, double y) { return g / (2.0 * y); })};
    });
}

Tensor tanh(const Tensor& a) {
    // d(tanh a)/da = 1 - tanh^2 = 1 - out^2
    return record("tanh", map_elements(a.value(), [](double x) { return std::tanh(x); }), {a}, [](const GradContext& c) -> Grads {
        return {zip_grad(c.grad, c.output(), [](double g, double y) { return g * (1.0 - y * y); })};
    });
}

Tensor erf(const Tensor& a) {
    // d(erf a)/da = 2/sqrt(pi) e^(-a^2)
    return record("erf", map_elements(a.value(), [](double x) { return std::erf(x); }), {a}, [](const GradContext& c) -> Grads {
        return {zip_grad(c.grad, c.input(0), [](double g, double x) { return g * M_2_SQRTPI * std::exp(-x * x); })};
    });
}

Tensor relu(const Tensor& a) {
    // d(relu a)/da = 0 where a <= 0, else 1; NaN passes through both ways, as in PyTorch
    return record("relu", map_elements(a.value(), [](double x) { return x <= 0.0 ? 0.0 : x; }), {a}, [](const GradContext& c) -> Grads {
        return {zip_grad(c.grad, c.input(0), [](double g, double x) { return x <= 0.0 ? 0.0 : g; })};
    });
}

Tensor sigmoid(const Tensor& a) {
    // d(s(a))/da = s(a)(1 - s(a)) = out (1 - out); the two branches avoid overflow of exp
    auto s = [](double x) { return x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x)); };
    return record("sigmoid", map_elements(a.value(), s), {a}, [](const GradContext& c) -> Grads {
        return {zip_grad(c.grad, c.output(), [](double g, double y) { return g * y * (1.0 - y); })};
    });
}

Tensor abs(const Tensor& a) {
    // d|a|/da = sign(a) (0 at 0, as in PyTorch)
    return record("abs", map_elements(a.value(), [](double x) { return std::fabs(x); }), {a}, [](const GradContext& c) -> Grads {
        return {zip_grad(c.grad, c.input(0), [](double g, double x) { return x > 0 ? g : (x < 0 ? -g : 0.0); })};
    });
}

// ---- sin, cos, clamp, maximum, minimum ------------------------------------------------------

Tensor sin(const Tensor& a) {
    // d(sin a)/da = cos a
    return record("sin", map_elements(a.value(), [](double x) { return std::sin(x); }), {a}, [](const GradContext& c) -> Grads {
        return {zip_grad(c.grad, c.input(0), [](double g, double x) { return g * std::cos(x); })};
    });
}

Tensor cos(const Tensor& a) {
    // d(cos a)/da = -sin a
    return record("cos", map_elements(a.value(), [](double x) { return std::cos(x); }), {a}, [](const GradContext& c) -> Grads {
        return {zip_grad(c.grad, c.input(0), [](double g, double x) { return -g * std::sin(x); })};
    });
}

Tensor clamp(const Tensor& a, std::optional<double> min, std::optional<double> max) {
    if (!min && !max) fail("clamp", fmt::format("needs a min or a max bound (input {})", shape_str(a.shape())));
    if ((min && std::isnan(*min)) || (max && std::isnan(*max))) {
        fail("clamp", fmt::format("bounds must not be NaN, got min {} and max {}", min ? fmt::format("{}", *min) : "none",
                                  max ? fmt::format("{}", *max) : "none"));
    }
    const double lo = min.value_or(-INFINITY), hi = max.value_or(INFINITY);
    // std::max/min keep a NaN first argument, so NaN inputs stay NaN (as in PyTorch)
    Array out = map_elements(a.value(), [lo, hi](double x) { return std::min(std::max(x, lo), hi); });
    // d clamp/da = 1 where lo <= a <= hi (bounds included, as PyTorch), else 0 (also for NaN)
    return record("clamp", std::move(out), {a}, [lo, hi](const GradContext& c) -> Grads {
        return {zip_grad(c.grad, c.input(0), [lo, hi](double g, double x) { return x >= lo && x <= hi ? g : 0.0; })};
    });
}

namespace {

// maximum (larger = true) or minimum: the NaN-propagating forward and PyTorch's tie rule.
Tensor extremum(const Tensor& a, const Tensor& b, bool larger, const char* op) {
    Array out = broadcast_apply(a.value(), b.value(), op, [larger](double x, double y) {
        if (std::isnan(x) || std::isnan(y)) return std::nan("");
        return larger ? (x > y ? x : y) : (x < y ? x : y);
    });
    // d/da = 1 where a wins, 1/2 where a == b, 0 where b wins (and 1 to both next to a NaN, as
    // torch: where(a == b, g / 2, g).masked_fill(b wins, 0)); symmetric for b
    return record(op, std::move(out), {a, b}, [larger](const GradContext& c) -> Grads {
        const Shape gs = shape_of(c.grad);
        const Array x = expand_to(c.input(0), gs), y = expand_to(c.input(1), gs);
        Grads g(2);
        for (std::size_t k = 0; k < 2; ++k) {
            if (!c.needs_grad(k)) continue;
            const Array& self = k == 0 ? x : y;
            const Array& other = k == 0 ? y : x;
            Array part = empty_like(c.grad);
            for (std::size_t i = 0; i < part.size(); ++i) {
                const double s = self.data()[i], o = other.data()[i], gi = c.grad.data()[i];
                const bool loses = larger ? s < o : s > o;
                part.data()[i] = s == o ? gi / 2.0 : (loses ? 0.0 : gi);
            }
            g[k] = reduce_to(std::move(part), c.input_shape(k));
        }
        return g;
    });
}

}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) { return extremum(a, b, true, "maximum"); }
Tensor minimum(const Tensor& a, const Tensor& b) { return extremum(a, b, false, "minimum"); }

}  // namespace xg
