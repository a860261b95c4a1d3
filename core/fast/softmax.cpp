#include "core/fast/softmax.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/fast/parallel.hpp"

namespace xg::fast {

namespace {

// The tensor seen as (outer, len, inner) around `axis`: element (o, j, i) is at
// o*len*inner + j*inner + i, so a "row" along the axis has stride `inner`.
struct AxisView {
    std::size_t outer = 1, len = 1, inner = 1;
};

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

}  // namespace

// out = (x - max) - log(sum(exp(x - max))) per row.
void log_softmax_forward(const double* px, double* po, std::size_t outer, std::size_t len, std::size_t inner) {
    const AxisView v{outer, len, inner};
    for_each_row(v, [&](std::size_t base) {
        const double m = row_max(px, base, v);
        double s = 0.0;
        for (std::size_t j = 0; j < v.len; ++j) s += std::exp(px[base + j * v.inner] - m);
        // (x - max) - log(s), not x - (max + log(s)): rounding max + log(s) at |x| ~ 1000 costs ~1e-13.
        const double log_s = std::log(s);
        for (std::size_t j = 0; j < v.len; ++j) po[base + j * v.inner] = (px[base + j * v.inner] - m) - log_s;
    });
}

// out = exp(x - max) / sum(exp(x - max)) per row. Not exp(log_softmax): subtracting the
// log-sum-exp at |x| ~ 1000 costs ulp(1000) ~ 1e-13 relative, while x - max is exact nearby.
void softmax_forward(const double* px, double* po, std::size_t outer, std::size_t len, std::size_t inner) {
    const AxisView v{outer, len, inner};
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
}

// g_in = y * (g - sum_j g_j y_j) per row
void softmax_backward(const double* py, const double* pg, double* pr, std::size_t outer, std::size_t len, std::size_t inner) {
    const AxisView v{outer, len, inner};
    for_each_row(v, [&](std::size_t base) {
        double dot = 0.0;
        for (std::size_t j = 0; j < v.len; ++j) dot += pg[base + j * v.inner] * py[base + j * v.inner];
        for (std::size_t j = 0; j < v.len; ++j) {
            const std::size_t k = base + j * v.inner;
            pr[k] = py[k] * (pg[k] - dot);
        }
    });
}

// g_in = g - softmax * sum_j g_j per row (softmax = exp(out))
void log_softmax_backward(const double* py, const double* pg, double* pr, std::size_t outer, std::size_t len, std::size_t inner) {
    const AxisView v{outer, len, inner};
    for_each_row(v, [&](std::size_t base) {
        double total = 0.0;
        for (std::size_t j = 0; j < v.len; ++j) total += pg[base + j * v.inner];
        for (std::size_t j = 0; j < v.len; ++j) {
            const std::size_t k = base + j * v.inner;
            pr[k] = pg[k] - std::exp(py[k]) * total;
        }
    });
}

}  // namespace xg::fast
