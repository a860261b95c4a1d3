#include "core/fast/softmax.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

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
template <class T>
double row_max(const T* x, std::size_t base, const AxisView& v) {
    double m = -std::numeric_limits<double>::infinity();
    for (std::size_t j = 0; j < v.len; ++j) m = std::max(m, static_cast<double>(x[base + j * v.inner]));
    return m;
}

}  // namespace

// out = (x - max) - log(sum(exp(x - max))) per row.
template <class T>
void log_softmax_forward(const T* px, T* po, std::size_t outer, std::size_t len, std::size_t inner) {
    const AxisView v{outer, len, inner};
    for_each_row(v, [&](std::size_t base) {
        const double m = row_max(px, base, v);
        double s = 0.0;
        for (std::size_t j = 0; j < v.len; ++j) s += std::exp(static_cast<double>(px[base + j * v.inner]) - m);
        // (x - max) - log(s), not x - (max + log(s)): rounding max + log(s) at |x| ~ 1000 costs ~1e-13.
        const double log_s = std::log(s);
        for (std::size_t j = 0; j < v.len; ++j) {
            po[base + j * v.inner] = static_cast<T>((static_cast<double>(px[base + j * v.inner]) - m) - log_s);
        }
    });
}

// out = exp(x - max) / sum(exp(x - max)) per row. Not exp(log_softmax): subtracting the
// log-sum-exp at |x| ~ 1000 costs ulp(1000) ~ 1e-13 relative, while x - max is exact nearby.
// A float32 row keeps its exponentials in a double scratch row (one per thread), so each output is
// rounded once, after the division.
template <class T>
void softmax_forward(const T* px, T* po, std::size_t outer, std::size_t len, std::size_t inner) {
    const AxisView v{outer, len, inner};
    for_each_row(v, [&](std::size_t base) {
        const double m = row_max(px, base, v);
        double s = 0.0;
        if constexpr (std::is_same_v<T, double>) {
            for (std::size_t j = 0; j < v.len; ++j) {
                const std::size_t k = base + j * v.inner;
                po[k] = std::exp(px[k] - m);
                s += po[k];
            }
            for (std::size_t j = 0; j < v.len; ++j) po[base + j * v.inner] /= s;
        } else {
            static thread_local std::vector<double> e;
            e.resize(v.len);
            for (std::size_t j = 0; j < v.len; ++j) {
                e[j] = std::exp(static_cast<double>(px[base + j * v.inner]) - m);
                s += e[j];
            }
            for (std::size_t j = 0; j < v.len; ++j) po[base + j * v.inner] = static_cast<T>(e[j] / s);
        }
    });
}

// g_in = y * (g - sum_j g_j y_j) per row
template <class T>
void softmax_backward(const T* py, const T* pg, T* pr, std::size_t outer, std::size_t len, std::size_t inner) {
    const AxisView v{outer, len, inner};
    for_each_row(v, [&](std::size_t base) {
        double dot = 0.0;
        for (std::size_t j = 0; j < v.len; ++j) dot += static_cast<double>(pg[base + j * v.inner]) * py[base + j * v.inner];
        for (std::size_t j = 0; j < v.len; ++j) {
            const std::size_t k = base + j * v.inner;
            pr[k] = static_cast<T>(static_cast<double>(py[k]) * (pg[k] - dot));
        }
    });
}

// g_in = g - softmax * sum_j g_j per row (softmax = exp(out))
template <class T>
void log_softmax_backward(const T* py, const T* pg, T* pr, std::size_t outer, std::size_t len, std::size_t inner) {
    const AxisView v{outer, len, inner};
    for_each_row(v, [&](std::size_t base) {
        double total = 0.0;
        for (std::size_t j = 0; j < v.len; ++j) total += pg[base + j * v.inner];
        for (std::size_t j = 0; j < v.len; ++j) {
            const std::size_t k = base + j * v.inner;
            pr[k] = static_cast<T>(pg[k] - std::exp(static_cast<double>(py[k])) * total);
        }
    });
}

#define XG_SOFTMAX_KERNELS(T)                                                                                   \
    template void softmax_forward<T>(const T*, T*, std::size_t, std::size_t, std::size_t);                    \
    template void softmax_backward<T>(const T*, const T*, T*, std::size_t, std::size_t, std::size_t);         \
    template void log_softmax_forward<T>(const T*, T*, std::size_t, std::size_t, std::size_t);                \
    template void log_softmax_backward<T>(const T*, const T*, T*, std::size_t, std::size_t, std::size_t);
XG_SOFTMAX_KERNELS(double)
XG_SOFTMAX_KERNELS(float)
#undef XG_SOFTMAX_KERNELS

}  // namespace xg::fast
