// Element-wise ops and NumPy broadcasting. Forward and backward side by side.
#include <cmath>
#include <functional>

#include <fmt/format.h>

#include "core/ops/ops.hpp"
#include "core/fast/strided.hpp"

namespace xg {

namespace {
// grad summed into `shape` (which differs from grad's): read in place, never copied first. A
// float32 gradient is summed in float64 too (the caller rounds the sums once).
template <class T>
Array summed_to(const xt::xarray<T>& grad, const Shape& shape) {
    Array out = xt::zeros<double>(shape);
    if (out.size() == 1) {  // a scalar operand: one running sum, same order as the strided walk
        double total = 0.0;
        for (std::size_t i = 0, n = grad.size(); i < n; ++i) total += grad.data()[i];
        out.data()[0] = total;
        return out;
    }
    const Shape gshape(grad.shape().begin(), grad.shape().end());
    const T* g = grad.data();
    double* o = out.data();
    parallel_for_each_index(gshape, broadcast_strides(shape, gshape), [&](std::size_t i, std::size_t io) { o[io] += g[i]; });
    return out;
}
}  // namespace

Array sum_to(Array grad, const Shape& shape) {
    if (std::equal(grad.shape().begin(), grad.shape().end(), shape.begin(), shape.end())) return grad;  // moved, not copied
    return summed_to(grad, shape);
}

namespace {
template <class T>
xt::xarray<T> expand_value(const xt::xarray<T>& a, const Shape& shape) {
    xt::xarray<T> out = empty_storage<T>(shape);
    const T* pa = a.data();
    T* po = out.data();
    const Shape sa(a.shape().begin(), a.shape().end());
    const Strides from = broadcast_strides(sa, shape);
    // writes at flat only, so the threads may split an expanded (stride 0) axis: the two-array walk
    parallel_for_each_index2(shape, from, from, [&](std::size_t i, std::size_t ia, std::size_t) { po[i] = pa[ia]; });
    return out;
}
void check_broadcasts_to(const Shape& from, const Shape& to, const char* op) {
    if (broadcast_shapes(from, to, op) != to) {
        fail(op, fmt::format("shape {} does not broadcast to {}", shape_str(from), shape_str(to)));
    }
}
}  // namespace

Tensor expand(const Tensor& a, const Shape& shape) {
    check_broadcasts_to(a.shape(), shape, "expand");
    // d expand(a)/da: every copy sends its gradient back to the one element, summed
    return on_storage(a, [&](const auto& values) {
        return record("expand", expand_value(values, shape), {a},
            [](const BackwardContext& c) -> std::vector<Tensor> { return {sum_to(c.grad, c.input_shape(0))}; });
    });
}

Tensor sum_to(const Tensor& a, const Shape& shape) {
    if (a.shape() == shape) return a;
    check_broadcasts_to(shape, a.shape(), "sum_to");
    // d sum_to(a)/da = 1 for every element summed: the gradient broadcast back
    // (summed in double, rounded once into a's dtype)
    return record("sum_to", on_storage(a, [&](const auto& values) { return summed_to(values, shape); }), {a},
        [](const BackwardContext& c) -> std::vector<Tensor> { return {expand(c.grad, c.input_shape(0))}; });
}

std::size_t normalize_axis(int axis, std::size_t ndim, const char* op) {
    const long n = static_cast<long>(ndim);
    if (axis < -n || axis >= n) fail(op, fmt::format("axis {} is out of range for a {}-D tensor", axis, ndim));
    return static_cast<std::size_t>(axis < 0 ? axis + n : axis);
}

// ---- binary -------------------------------------------------------------------------------
// Each op runs on its operands' own storage (on_storage): float32 tensors in float32 storage and,
// for +, -, * and /, float arithmetic (the same bits as float64 arithmetic rounded once; see
// broadcast_zip), no float64 mirror. Their backwards below are the only statement of each
// derivative: a first-order backward runs them unrecorded in the gradient's own dtype, and
// create_graph recorded.

namespace {

// op `name` on a and b element by element (broadcast), in their storage: f(x, y) per element.
template <class F>
Tensor zip(const char* name, const Tensor& a, const Tensor& b, F f, Backward backward) {
    return on_storage(a, b, [&](const auto& va, const auto& vb) {
        return record(name, broadcast_zip(va, vb, f, name), {a, b}, std::move(backward));
    });
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
    // d(a+b)/da = 1, d(a+b)/db = 1, each summed over its broadcast axes
    return zip("add", a, b, std::plus<>(), [](const BackwardContext& c) -> std::vector<Tensor> {
        return {c.needs_grad(0) ? sum_to(c.grad, c.input_shape(0)) : Tensor(),
                c.needs_grad(1) ? sum_to(c.grad, c.input_shape(1)) : Tensor()};
    });
}

Tensor sub(const Tensor& a, const Tensor& b) {
    // d(a-b)/da = 1, d(a-b)/db = -1
    return zip("sub", a, b, std::minus<>(), [](const BackwardContext& c) -> std::vector<Tensor> {
        return {c.needs_grad(0) ? sum_to(c.grad, c.input_shape(0)) : Tensor(),
                c.needs_grad(1) ? neg(sum_to(c.grad, c.input_shape(1))) : Tensor()};  // negated after summing: fewer elements, same bits
    });
}

Tensor mul(const Tensor& a, const Tensor& b) {
    // d(ab)/da = b, d(ab)/db = a: g times the other input, summed over the input's broadcast axes
    return zip("mul", a, b, std::multiplies<>(), [](const BackwardContext& c) -> std::vector<Tensor> {
        return {c.needs_grad(0) ? sum_to(c.grad * c.input(1), c.input_shape(0)) : Tensor(),
                c.needs_grad(1) ? sum_to(c.grad * c.input(0), c.input_shape(1)) : Tensor()};
    });
}

Tensor div(const Tensor& a, const Tensor& b) {
    // d(a/b)/da = 1/b, d(a/b)/db = -a/b^2 = -out/b (the sign put on b: b is often the smaller)
    return zip("div", a, b, std::divides<>(), [](const BackwardContext& c) -> std::vector<Tensor> {
        return {c.needs_grad(0) ? sum_to(c.grad / c.input(1), c.input_shape(0)) : Tensor(),
                c.needs_grad(1) ? sum_to(c.grad * c.output() / neg(c.input(1)), c.input_shape(1)) : Tensor()};
    });
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
// A C++ number takes the tensor's dtype: it never promotes (PyTorch's wrapped numbers).
Tensor operator+(const Tensor& a, double b) { return add(a, scalar(b, a.dtype())); }
Tensor operator-(const Tensor& a, double b) { return sub(a, scalar(b, a.dtype())); }
Tensor operator*(const Tensor& a, double b) { return mul(a, scalar(b, a.dtype())); }
Tensor operator/(const Tensor& a, double b) { return div(a, scalar(b, a.dtype())); }
Tensor operator+(double a, const Tensor& b) { return add(scalar(a, b.dtype()), b); }
Tensor operator-(double a, const Tensor& b) { return sub(scalar(a, b.dtype()), b); }
Tensor operator*(double a, const Tensor& b) { return mul(scalar(a, b.dtype()), b); }
Tensor operator/(double a, const Tensor& b) { return div(scalar(a, b.dtype()), b); }
Tensor operator-(const Tensor& a) { return neg(a); }

namespace {

// op `name` on a's elements in a's storage: f(x) per element, computed in double and rounded once
// into the storage (a float32 result has the float64 op's bits, rounded).
template <class F>
Tensor unary(const char* name, const Tensor& a, F f, Backward backward) {
    return on_storage(a, [&](const auto& values) {
        return record(name, map_elements(values, [f](double x) { return f(x); }), {a}, std::move(backward));
    });
}

// The gradient times a piecewise-constant derivative `w` (relu, abs, clamp, maximum), exactly 0
// where w is 0 even for an infinite or NaN gradient (PyTorch's backwards select there). w is a
// constant of the graph: its own derivative is 0 almost everywhere.
Tensor times_step(const Tensor& g, Array w) {
    Mask zero = xt::equal(w, 0.0);
    return masked_fill(g * Tensor(std::move(w), g.dtype()), zero, 0.0);
}

// f(x) of each element of t, read in t's storage, as float64 constants (a step's values, a mask).
template <class R, class F>
xt::xarray<R> of_elements(const Tensor& t, F f) {
    return on_storage(t, [&](const auto& values) {
        xt::xarray<R> out = xt::xarray<R>::from_shape(values.shape());
        for (std::size_t i = 0; i < values.size(); ++i) out.data()[i] = f(static_cast<double>(values.data()[i]));
        return out;
    });
}

}  // namespace

// ---- unary --------------------------------------------------------------------------------

Tensor neg(const Tensor& a) {
    // d(-a)/da = -1
    return unary("neg", a, [](double x) { return -x; }, [](const BackwardContext& c) -> std::vector<Tensor> { return {neg(c.grad)}; });
}

Tensor pow(const Tensor& a, double p) {
    // d(a^p)/da = p a^(p-1); a^0 = 1 is constant, so 0 also at a = 0 (where 0 * 0^-1 is NaN), as PyTorch
    return unary("pow", a, [p](double x) { return std::pow(x, p); }, [p](const BackwardContext& c) -> std::vector<Tensor> {
        if (p == 0.0) return {zeros(c.input_shape(0))};
        return {c.grad * p * pow(c.input(0), p - 1.0)};
    });
}

Tensor exp(const Tensor& a) {
    // d(e^a)/da = e^a = out
    return unary("exp", a, [](double x) { return std::exp(x); }, [](const BackwardContext& c) -> std::vector<Tensor> { return {c.grad * c.output()}; });
}

Tensor log(const Tensor& a) {
    // d(ln a)/da = 1/a
    return unary("log", a, [](double x) { return std::log(x); }, [](const BackwardContext& c) -> std::vector<Tensor> { return {c.grad / c.input(0)}; });
}

Tensor sqrt(const Tensor& a) {
    // d(sqrt a)/da = 1 / (2 sqrt a) = 1 / (2 out)
    return unary("sqrt", a, [](double x) { return std::sqrt(x); }, [](const BackwardContext& c) -> std::vector<Tensor> { return {c.grad / (2.0 * c.output())}; });
}

Tensor tanh(const Tensor& a) {
    // d(tanh a)/da = 1 - tanh^2 = 1 - out^2
    return unary("tanh", a, [](double x) { return std::tanh(x); }, [](const BackwardContext& c) -> std::vector<Tensor> { return {c.grad * (1.0 - c.output() * c.output())}; });
}

Tensor erf(const Tensor& a) {
    // d(erf a)/da = 2/sqrt(pi) e^(-a^2)
    return unary("erf", a, [](double x) { return std::erf(x); }, [](const BackwardContext& c) -> std::vector<Tensor> { return {c.grad * M_2_SQRTPI * exp(neg(c.input(0) * c.input(0)))}; });
}

Tensor relu(const Tensor& a) {
    // d(relu a)/da = 0 where a <= 0, else 1; NaN passes through both ways, as in PyTorch
    return unary("relu", a, [](double x) { return x <= 0.0 ? 0.0 : x; }, [](const BackwardContext& c) -> std::vector<Tensor> {
        return {masked_fill(c.grad, of_elements<bool>(c.input(0), [](double x) { return x <= 0.0; }), 0.0)};
    });
}

Tensor sigmoid(const Tensor& a) {
    // d(s(a))/da = s(a)(1 - s(a)) = out (1 - out); the two branches avoid overflow of exp
    auto s = [](double x) { return x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x)); };
    return unary("sigmoid", a, s, [](const BackwardContext& c) -> std::vector<Tensor> { return {c.grad * c.output() * (1.0 - c.output())}; });
}

Tensor abs(const Tensor& a) {
    // d|a|/da = sign(a) (0 at 0, as in PyTorch)
    return unary("abs", a, [](double x) { return std::fabs(x); }, [](const BackwardContext& c) -> std::vector<Tensor> {
        return {times_step(c.grad, of_elements<double>(c.input(0), [](double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0); }))};
    });
}

// ---- sin, cos, clamp, maximum, minimum ------------------------------------------------------

Tensor sin(const Tensor& a) {
    // d(sin a)/da = cos a
    return unary("sin", a, [](double x) { return std::sin(x); }, [](const BackwardContext& c) -> std::vector<Tensor> { return {c.grad * cos(c.input(0))}; });
}

Tensor cos(const Tensor& a) {
    // d(cos a)/da = -sin a
    return unary("cos", a, [](double x) { return std::cos(x); }, [](const BackwardContext& c) -> std::vector<Tensor> { return {neg(c.grad * sin(c.input(0)))}; });
}

Tensor clamp(const Tensor& a, std::optional<double> min, std::optional<double> max) {
    if (!min && !max) fail("clamp", fmt::format("needs a min or a max bound (input {})", shape_str(a.shape())));
    if ((min && std::isnan(*min)) || (max && std::isnan(*max))) {
        fail("clamp", fmt::format("bounds must not be NaN, got min {} and max {}", min ? fmt::format("{}", *min) : "none",
                                  max ? fmt::format("{}", *max) : "none"));
    }
    const double lo = min.value_or(-INFINITY), hi = max.value_or(INFINITY);
    // std::max/min keep a NaN first argument, so NaN inputs stay NaN (as in PyTorch)
    // d clamp/da = 1 where lo <= a <= hi (bounds included, as PyTorch), else 0 (also for NaN)
    return unary("clamp", a, [lo, hi](double x) { return std::min(std::max(x, lo), hi); }, [lo, hi](const BackwardContext& c) -> std::vector<Tensor> {
        return {masked_fill(c.grad, of_elements<bool>(c.input(0), [lo, hi](double x) { return !(x >= lo && x <= hi); }), 0.0)};
    });
}

namespace {

// maximum (larger = true) or minimum: the NaN-propagating forward and PyTorch's tie rule.
Tensor extremum(const Tensor& a, const Tensor& b, bool larger, const char* op) {
    const auto wins = [larger](double x, double y) {
        if (std::isnan(x) || std::isnan(y)) return std::nan("");
        return larger ? (x > y ? x : y) : (x < y ? x : y);
    };
    // d/da = 1 where a wins, 1/2 where a == b, 0 where b wins (and 1 to both next to a NaN, as
    // torch: where(a == b, g / 2, g).masked_fill(b wins, 0)); symmetric for b
    return zip(op, a, b, wins, [larger](const BackwardContext& c) -> std::vector<Tensor> {
        std::vector<Tensor> g(2);
        for (std::size_t k = 0; k < 2; ++k) {
            if (!c.needs_grad(k)) continue;
            // the share of the gradient input k takes, per output element
            Array share = on_storage(c.input(k), c.input(1 - k), [larger](const auto& self_values, const auto& other_values) {
                const Array self = self_values, other = other_values;  // widened: the share is a float64 constant
                return broadcast_zip(self, other, [larger](double self, double other) {
                    const bool loses = larger ? self < other : self > other;
                    return self == other ? 0.5 : (loses ? 0.0 : 1.0);
                });
            });
            g[k] = sum_to(times_step(c.grad, std::move(share)), c.input_shape(k));
        }
        return g;
    });
}

}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) { return extremum(a, b, true, "maximum"); }
Tensor minimum(const Tensor& a, const Tensor& b) { return extremum(a, b, false, "minimum"); }

}  // namespace xg
