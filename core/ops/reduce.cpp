// Reductions over axes. Each reduction computes in the keepdim shape (so outputs broadcast back
// against the input with plain strided loops) and drops the axes at the end when asked.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include <fmt/format.h>

#include "core/ops/ops.hpp"
#include "core/fast/strided.hpp"

namespace xg {

namespace {


struct Reduction {
    Shape in;       // input shape
    Shape kept;     // output shape with reduced axes set to 1
    Shape out;      // output shape as returned (kept, or without the reduced axes)
    Strides to_out; // strides reading the kept-shape output while walking the input
    std::size_t count = 1; // elements reduced into each output
};

Reduction plan(const Shape& in, const Axes& axes, bool keepdim, const char* op) {
    Reduction r;
    r.in = in;
    r.kept = in;
    std::vector<bool> reduce(in.size(), axes.empty());
    for (int a : axes) {
        const std::size_t ax = normalize_axis(a, in.size(), op);
        if (reduce[ax] && !axes.empty()) {
            fail(op, fmt::format("axis {} appears twice in the axes list of input {}", a, shape_str(in)));
        }
        reduce[ax] = true;
    }
    for (std::size_t i = 0; i < in.size(); ++i) {
        if (reduce[i]) {
            r.count *= in[i];
            r.kept[i] = 1;
        } else {
            r.out.push_back(in[i]);
        }
    }
    if (keepdim) r.out = r.kept;
    r.to_out = broadcast_strides(r.kept, in);
    return r;
}

// The sums in double of a's elements (storage T) into the kept shape.
template <class T>
Array sum_into_kept(const xt::xarray<T>& a, const Reduction& r) {
    Array out = xt::zeros<double>(r.kept);
    const T* pa = a.data();
    double* po = out.data();
    parallel_for_each_index(r.in, r.to_out, [&](std::size_t i, std::size_t io) { po[io] += pa[i]; });
    return out;
}

// The gradient of a reduction's output (returned shape) spread back over the input: every
// reduced element gets its slot's value.
Tensor spread(const Tensor& g, const Reduction& r) {
    return expand(reshape(g, std::vector<long>(r.kept.begin(), r.kept.end())), r.in);
}

// The axes of the kept shape that are 1: a mean over them is the reduction's mean (an axis that
// was 1 already changes nothing).
Axes kept_ones(const Reduction& r) {
    Axes reduced;
    for (std::size_t i = 0; i < r.kept.size(); ++i) {
        if (r.kept[i] == 1) reduced.push_back(static_cast<int>(i));
    }
    return reduced;
}

Array reshaped(Array a, const Shape& shape) {
    a.reshape(shape);
    return a;
}

bool is_max_of(double x, double m) { return x == m || (std::isnan(x) && std::isnan(m)); }
bool is_min_of(double x, double m) { return std::isnan(m) ? std::isnan(x) : x == m; }

// The number k of elements of each reduced slice that equal its extreme `kept`, at those k
// elements, and 0 elsewhere.
template <class T, class IsExtreme>
Array tie_weights(const xt::xarray<T>& x, const Array& kept, const Reduction& r, IsExtreme is_extreme) {
    const T* px = x.data();
    const double* pm = kept.data();
    Array ties = xt::zeros<double>(r.kept);
    parallel_for_each_index(r.in, r.to_out, [&](std::size_t i, std::size_t io) { ties.data()[io] += is_extreme(px[i], pm[io]) ? 1.0 : 0.0; });
    Array k = Array::from_shape(r.in);
    parallel_for_each_index(r.in, r.to_out, [&](std::size_t i, std::size_t io) { k.data()[i] = is_extreme(px[i], pm[io]) ? ties.data()[io] : 0.0; });
    return k;
}

// g / k where k (tie_weights) is not 0, exactly 0 elsewhere (even for an infinite gradient);
// k is a constant of the graph.
Tensor times_ties(const Tensor& g, Array k) {
    Mask elsewhere = xt::equal(k, 0.0);
    k = xt::where(elsewhere, 1.0, k);  // divides by 1 where the mask then writes 0: no 0/0 in a second backward
    return masked_fill(g / Tensor(std::move(k), g.dtype()), elsewhere, 0.0);
}

}  // namespace

Tensor sum(const Tensor& a) { return sum(a, {}, false); }

Tensor sum(const Tensor& a, const Axes& axes, bool keepdim) {
    const Reduction r = plan(a.shape(), axes, keepdim, "sum");
    Array out = reshaped(on_storage(a, [&](const auto& values) { return sum_into_kept(values, r); }), r.out);
    // d(sum x)/dx_i = 1: the output gradient is copied to every reduced element
    return record("sum", std::move(out), {a}, [r](const BackwardContext& c) -> std::vector<Tensor> { return {spread(c.grad, r)}; });
}

Tensor mean(const Tensor& a) { return mean(a, {}, false); }

Tensor mean(const Tensor& a, const Axes& axes, bool keepdim) {
    const Reduction r = plan(a.shape(), axes, keepdim, "mean");
    if (r.count == 0) fail("mean", "cannot average over an empty axis of shape " + shape_str(r.in));
    Array out = on_storage(a, [&](const auto& values) { return sum_into_kept(values, r); });
    out /= static_cast<double>(r.count);
    // d(mean x)/dx_i = 1/N
    return record("mean", reshaped(std::move(out), r.out), {a}, [r](const BackwardContext& c) -> std::vector<Tensor> {
        return {spread(c.grad * (1.0 / static_cast<double>(r.count)), r)};  // scaled before spreading: N times fewer products
    });
}

Tensor var(const Tensor& a, const Axes& axes, bool unbiased, bool keepdim) {
    const Reduction r = plan(a.shape(), axes, keepdim, "var");
    const double denom = static_cast<double>(r.count) - (unbiased ? 1.0 : 0.0);
    if (denom <= 0) {
        fail("var", fmt::format("needs more than {} element(s) per reduction, got {} (shape {})", unbiased ? 1 : 0,
                                r.count, shape_str(r.in)));
    }
    // Two passes (mean, then squared deviations): E[x^2]-E[x]^2 loses all digits for large means.
    Array out = on_storage(a, [&](const auto& values) {
        Array mu = sum_into_kept(values, r);
        mu /= static_cast<double>(r.count);
        Array squares = xt::zeros<double>(r.kept);
        const auto* pa = values.data();
        const double* pm = mu.data();
        double* po = squares.data();
        parallel_for_each_index(r.in, r.to_out, [&](std::size_t i, std::size_t io) {
            const double d = pa[i] - pm[io];
            po[io] += d * d;
        });
        return squares;
    });
    out /= denom;
    // d var/dx_i = 2 (x_i - mean) / (N - ddof)
    return record("var", reshaped(std::move(out), r.out), {a}, [r, denom](const BackwardContext& c) -> std::vector<Tensor> {
        // the 2 goes on the (smaller) gradient, broadcast against the input from the kept shape
        const Tensor x = c.input(0);
        return {(x - mean(x, kept_ones(r), true)) / denom * reshape(2.0 * c.grad, std::vector<long>(r.kept.begin(), r.kept.end()))};
    });
}

namespace {

// max (largest) or min over `axes`. A NaN wins: it is the extreme of its slice and stays so
// (std::max would drop it), as torch.amax / torch.amin.
Tensor extreme(const Tensor& a, const Axes& axes, bool keepdim, bool largest, const char* op) {
    const Reduction r = plan(a.shape(), axes, keepdim, op);
    if (r.count == 0) {
        fail(op, fmt::format("cannot take the {} over an empty axis of shape {}", largest ? "maximum" : "minimum", shape_str(r.in)));
    }
    Array out = Array::from_shape(r.kept);
    out.fill(largest ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity());
    double* po = out.data();
    on_storage(a, [&](const auto& values) {
        const auto* pa = values.data();
        parallel_for_each_index(r.in, r.to_out, [&](std::size_t i, std::size_t io) {
            if (std::isnan(po[io])) return;
            if (std::isnan(pa[i]) || (largest ? pa[i] > po[io] : pa[i] < po[io])) po[io] = pa[i];
        });
    });
    // d max/dx_i = 1/k for the k elements equal to the extreme (the k NaNs when it is NaN), 0
    // elsewhere: g spread over the reduced axes, divided by those constant counts
    Array value = reshaped(out, r.out);  // a copy: `out` stays in the kept shape for backward
    return record(op, std::move(value), {a}, [r, largest, kept = std::move(out)](const BackwardContext& c) -> std::vector<Tensor> {
        Array ties = on_storage(c.input(0), [&](const auto& x) {
            return largest ? tie_weights(x, kept, r, is_max_of) : tie_weights(x, kept, r, is_min_of);
        });
        return {times_ties(spread(c.grad, r), std::move(ties))};
    }, {{op, r.kept}});
}

}  // namespace

Tensor max(const Tensor& a) { return max(a, {}, false); }
Tensor max(const Tensor& a, const Axes& axes, bool keepdim) { return extreme(a, axes, keepdim, true, "max"); }
Tensor min(const Tensor& a) { return min(a, {}, false); }
Tensor min(const Tensor& a, const Axes& axes, bool keepdim) { return extreme(a, axes, keepdim, false, "min"); }

}  // namespace xg
