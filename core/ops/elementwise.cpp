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
Array expand_value(const Array& a, const Shape& shape) {
    Array out = empty_array(shape);
    const double* pa = a.data();
    double* po = out.data();
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
    return record("expand", expand_value(a.value(), shape), {a},
        [](const BackwardContext& c) -> std::vector<Tensor> { return {sum_to(c.grad, c.input_shape(0))}; });
}

Tensor sum_to(const Tensor& a, const Shape& shape) {
    if (a.shape() == shape) return a;
    check_broadcasts_to(shape, a.shape(), "sum_to");
    // d sum_to(a)/da = 1 for every element summed: the gradient broadcast back
    return record("sum_to", summed_to(a.value(), shape), {a},
        [](const BackwardContext& c) -> std::vector<Tensor> { return {expand(c.grad, c.input_shape(0))}; });
}

std::size_t normalize_axis(int axis, std::size_t ndim, const char* op) {
    const long n = static_cast<long>(ndim);
    if (axis < -n || axis >= n) fail(op, fmt::format("axis {} is out of range for a {}-D tensor", axis, ndim));
    return static_cast<std::size_t>(axis < 0 ? axis + n : axis);
}

// ---- binary -------------------------------------------------------------------------------

namespace {

// ---- float32 add, sub, mul: float32 storage, float arithmetic (for +, - and * the same bits as
// float64 arithmetic rounded once: see apply), no float64 mirror of any operand.

enum class Binary { add, sub, mul };

// In float: a float sum, difference or product of two floats is the float64 one rounded once, bit
// for bit (double has 53 >= 2 x 24 + 2 bits, so its rounding never moves the float rounding), and
// a float loop vectorises twice as wide.
template <Binary op>
float apply(float a, float b) {
    if constexpr (op == Binary::add) return a + b;
    else if constexpr (op == Binary::sub) return a - b;
    else return a * b;
}

template <Binary op>
FloatArray zip32(const FloatArray& a, const FloatArray& b, const char* name) {
    const float *pa = a.data(), *pb = b.data();
    // out[i] = value(i) over the elements of `like`'s shape
    const auto elementwise = [](const FloatArray& like, auto&& value) {
        FloatArray out = FloatArray::from_shape(like.shape());
        float* po = out.data();
        detail::parallel_for(out.size(), 1, [&](std::size_t begin, std::size_t end) {
            for (std::size_t i = begin; i < end; ++i) po[i] = value(i);
        });
        return out;
    };
    if (a.shape() == b.shape()) return elementwise(a, [&](std::size_t i) { return apply<op>(pa[i], pb[i]); });
    if (b.size() == 1 && b.dimension() <= a.dimension()) {  // x * 0.5, g * scale
        const float vb = pb[0];
        return elementwise(a, [&](std::size_t i) { return apply<op>(pa[i], vb); });
    }
    if (a.size() == 1 && a.dimension() <= b.dimension()) {  // 1.0 - x
        const float va = pa[0];
        return elementwise(b, [&](std::size_t i) { return apply<op>(va, pb[i]); });
    }
    const Shape sa(a.shape().begin(), a.shape().end()), sb(b.shape().begin(), b.shape().end());
    const Shape so = broadcast_shapes(sa, sb, name);
    FloatArray out = FloatArray::from_shape(so);
    float* po = out.data();
    parallel_for_each_index2(so, broadcast_strides(sa, so), broadcast_strides(sb, so), [&](std::size_t i, std::size_t ia, std::size_t ib) {
        po[i] = apply<op>(pa[ia], pb[ib]);
    });
    return out;
}

// dLoss/d input i of a float32 add, sub or mul: g (add), -g (sub's b), g * other input (mul),
// summed in float64 over the axes input i was broadcast along and rounded once.
FloatArray binary_grad32(Binary op, const GradContext& c, std::size_t i) {
    const FloatArray& g = c.grad32();
    const Shape out_shape(g.shape().begin(), g.shape().end()), in_shape = c.input_shape(i);
    const bool negate = op == Binary::sub && i == 1;
    if (op != Binary::mul) {
        if (in_shape == out_shape && i == 0) return c.take_grad32();  // g itself (add's and sub's a): the last read of g
        if (in_shape == out_shape) {
            FloatArray part = FloatArray::from_shape(g.shape());
            const float* pg = g.data();
            float* pp = part.data();
            detail::parallel_for(g.size(), 1, [&](std::size_t begin, std::size_t end) {
                for (std::size_t k = begin; k < end; ++k) pp[k] = negate ? -pg[k] : pg[k];
            });
            return part;
        }
        Array sums = summed_to(g, in_shape);
        if (negate) sums = -sums;  // negated after summing: fewer elements, same bits
        return to_float32_array(sums);
    }
    const FloatArray& other = c.input32(1 - i);
    const Shape other_shape(other.shape().begin(), other.shape().end());
    const float *pg = g.data(), *po = other.data();
    if (in_shape == out_shape) {
        FloatArray part = FloatArray::from_shape(g.shape());
        float* pp = part.data();
        parallel_for_each_index2(out_shape, broadcast_strides(other_shape, out_shape), broadcast_strides(other_shape, out_shape),
                                 [&](std::size_t k, std::size_t ko, std::size_t) {
                                     pp[k] = pg[k] * po[ko];  // the float product: the float64 one rounded (apply)
                                 });
        return part;
    }
    // broadcast operand: the products in float64, then their sums (the float64 path rounds the
    // products to float32 first; this keeps them exact, within the same bound)
    Array products = Array::from_shape(out_shape);
    double* pp = products.data();
    parallel_for_each_index2(out_shape, broadcast_strides(other_shape, out_shape), broadcast_strides(other_shape, out_shape),
                             [&](std::size_t k, std::size_t ko, std::size_t) { pp[k] = static_cast<double>(pg[k]) * po[ko]; });
    return to_float32_array(summed_to(products, in_shape));
}

Tensor binary32(Binary op, const Tensor& a, const Tensor& b, const char* name, Backward twin) {
    const FloatArray &va = a.values<float>(), &vb = b.values<float>();
    FloatArray out = op == Binary::add ? zip32<Binary::add>(va, vb, name)
                     : op == Binary::sub ? zip32<Binary::sub>(va, vb, name)
                                         : zip32<Binary::mul>(va, vb, name);
    return record(name, std::move(out), {a, b}, [op](const GradContext& c) -> Grads {
        Grads g(2);
        for (std::size_t i : {1, 0}) {  // input 0 last: its part may take the incoming gradient itself
            if (c.needs_grad(i)) g[i] = binary_grad32(op, c, i);
        }
        return g;
    }, {}, std::move(twin));
}

bool both_float32(const Tensor& a, const Tensor& b) { return a.dtype() == kFloat32 && b.dtype() == kFloat32; }

// The backwards in Tensor ops: float64's first-order backward and every dtype's create_graph one.
std::vector<Tensor> add_backward(const BackwardContext& c) {
    return {c.needs_grad(0) ? sum_to(c.grad, c.input_shape(0)) : Tensor(),
            c.needs_grad(1) ? sum_to(c.grad, c.input_shape(1)) : Tensor()};
}

std::vector<Tensor> sub_backward(const BackwardContext& c) {
    return {c.needs_grad(0) ? sum_to(c.grad, c.input_shape(0)) : Tensor(),
            c.needs_grad(1) ? neg(sum_to(c.grad, c.input_shape(1))) : Tensor()};  // negated after summing: fewer elements, same bits
}

std::vector<Tensor> mul_backward(const BackwardContext& c) {
    return {c.needs_grad(0) ? sum_to(c.grad * c.input(1), c.input_shape(0)) : Tensor(),
            c.needs_grad(1) ? sum_to(c.grad * c.input(0), c.input_shape(1)) : Tensor()};
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
    if (both_float32(a, b)) return binary32(Binary::add, a, b, "add", add_backward);
    Array out = broadcast_zip(a.value(), b.value(), std::plus<>(), "add");
    // d(a+b)/da = 1, d(a+b)/db = 1, each summed over its broadcast axes
    return record("add", std::move(out), {a, b}, add_backward);
}

Tensor sub(const Tensor& a, const Tensor& b) {
    if (both_float32(a, b)) return binary32(Binary::sub, a, b, "sub", sub_backward);
    Array out = broadcast_zip(a.value(), b.value(), std::minus<>(), "sub");
    // d(a-b)/da = 1, d(a-b)/db = -1
    return record("sub", std::move(out), {a, b}, sub_backward);
}

Tensor mul(const Tensor& a, const Tensor& b) {
    if (both_float32(a, b)) return binary32(Binary::mul, a, b, "mul", mul_backward);
    Array out = broadcast_zip(a.value(), b.value(), std::multiplies<>(), "mul");
    // d(ab)/da = b, d(ab)/db = a: g times the other input, summed over the input's broadcast axes
    return record("mul", std::move(out), {a, b}, mul_backward);
}

Tensor div(const Tensor& a, const Tensor& b) {
    Array out = broadcast_zip(a.value(), b.value(), std::divides<>(), "div");
    // d(a/b)/da = 1/b, d(a/b)/db = -a/b^2 = -out/b (the sign put on b: b is often the smaller)
    return record("div", std::move(out), {a, b}, [](const BackwardContext& c) -> std::vector<Tensor> {
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

// The gradient times a piecewise-constant derivative `w` (relu, abs, clamp, maximum), exactly 0
// where w is 0 even for an infinite or NaN gradient (PyTorch's backwards select there). w is a
// constant of the graph: its own derivative is 0 almost everywhere.
Tensor times_step(const Tensor& g, Array w) {
    Mask zero = xt::equal(w, 0.0);
    return masked_fill(g * Tensor(std::move(w), g.dtype()), zero, 0.0);
}

}  // namespace

// ---- unary --------------------------------------------------------------------------------

Tensor neg(const Tensor& a) {
    // d(-a)/da = -1
    return record("neg", map_elements(a.value(), [](double x) { return -x; }), {a}, [](const BackwardContext& c) -> std::vector<Tensor> { return {neg(c.grad)}; });
}

Tensor pow(const Tensor& a, double p) {
    // d(a^p)/da = p a^(p-1); a^0 = 1 is constant, so 0 also at a = 0 (where 0 * 0^-1 is NaN), as PyTorch
    return record("pow", map_elements(a.value(), [p](double x) { return std::pow(x, p); }), {a}, [p](const BackwardContext& c) -> std::vector<Tensor> {
        if (p == 0.0) return {zeros(c.input_shape(0))};
        return {c.grad * p * pow(c.input(0), p - 1.0)};
    });
}

Tensor exp(const Tensor& a) {
    // d(e^a)/da = e^a = out
    return record("exp", map_elements(a.value(), [](double x) { return std::exp(x); }), {a}, [](const BackwardContext& c) -> std::vector<Tensor> { return {c.grad * c.output()}; });
}

Tensor log(const Tensor& a) {
    // d(ln a)/da = 1/a
    return record("log", map_elements(a.value(), [](double x) { return std::log(x); }), {a}, [](const BackwardContext& c) -> std::vector<Tensor> { return {c.grad / c.input(0)}; });
}

Tensor sqrt(const Tensor& a) {
    // d(sqrt a)/da = 1 / (2 sqrt a) = 1 / (2 out)
    return record("sqrt", map_elements(a.value(), [](double x) { return std::sqrt(x); }), {a}, [](const BackwardContext& c) -> std::vector<Tensor> { return {c.grad / (2.0 * c.output())}; });
}

Tensor tanh(const Tensor& a) {
    // d(tanh a)/da = 1 - tanh^2 = 1 - out^2
    return record("tanh", map_elements(a.value(), [](double x) { return std::tanh(x); }), {a}, [](const BackwardContext& c) -> std::vector<Tensor> { return {c.grad * (1.0 - c.output() * c.output())}; });
}

Tensor erf(const Tensor& a) {
    // d(erf a)/da = 2/sqrt(pi) e^(-a^2)
    return record("erf", map_elements(a.value(), [](double x) { return std::erf(x); }), {a}, [](const BackwardContext& c) -> std::vector<Tensor> { return {c.grad * M_2_SQRTPI * exp(neg(c.input(0) * c.input(0)))}; });
}

Tensor relu(const Tensor& a) {
    // d(relu a)/da = 0 where a <= 0, else 1; NaN passes through both ways, as in PyTorch
    return record("relu", map_elements(a.value(), [](double x) { return x <= 0.0 ? 0.0 : x; }), {a}, [](const BackwardContext& c) -> std::vector<Tensor> {
        return {masked_fill(c.grad, Mask(c.input(0).value() <= 0.0), 0.0)};
    });
}

Tensor sigmoid(const Tensor& a) {
    // d(s(a))/da = s(a)(1 - s(a)) = out (1 - out); the two branches avoid overflow of exp
    auto s = [](double x) { return x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x)); };
    return record("sigmoid", map_elements(a.value(), s), {a}, [](const BackwardContext& c) -> std::vector<Tensor> { return {c.grad * c.output() * (1.0 - c.output())}; });
}

Tensor abs(const Tensor& a) {
    // d|a|/da = sign(a) (0 at 0, as in PyTorch)
    return record("abs", map_elements(a.value(), [](double x) { return std::fabs(x); }), {a}, [](const BackwardContext& c) -> std::vector<Tensor> {
        return {times_step(c.grad, map_elements(c.input(0).value(), [](double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0); }))};
    });
}

// ---- sin, cos, clamp, maximum, minimum ------------------------------------------------------

Tensor sin(const Tensor& a) {
    // d(sin a)/da = cos a
    return record("sin", map_elements(a.value(), [](double x) { return std::sin(x); }), {a}, [](const BackwardContext& c) -> std::vector<Tensor> { return {c.grad * cos(c.input(0))}; });
}

Tensor cos(const Tensor& a) {
    // d(cos a)/da = -sin a
    return record("cos", map_elements(a.value(), [](double x) { return std::cos(x); }), {a}, [](const BackwardContext& c) -> std::vector<Tensor> { return {neg(c.grad * sin(c.input(0)))}; });
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
    return record("clamp", std::move(out), {a}, [lo, hi](const BackwardContext& c) -> std::vector<Tensor> {
        const Array& x = c.input(0).value();
        return {masked_fill(c.grad, Mask(!(x >= lo && x <= hi)), 0.0)};
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
    return record(op, broadcast_zip(a.value(), b.value(), wins, op), {a, b}, [larger](const BackwardContext& c) -> std::vector<Tensor> {
        std::vector<Tensor> g(2);
        for (std::size_t k = 0; k < 2; ++k) {
            if (!c.needs_grad(k)) continue;
            // the share of the gradient input k takes, per output element
            Array share = broadcast_zip(c.input(k).value(), c.input(1 - k).value(), [larger](double self, double other) {
                const bool loses = larger ? self < other : self > other;
                return self == other ? 0.5 : (loses ? 0.0 : 1.0);
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
