#include "core/fast/softmax.hpp"
#include "core/reference/softmax.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/fast/parallel.hpp"
#include "core/fast/vector_math.hpp"

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

// The float32 rows: their exponentials go through a double scratch row (one per thread), computed
// by glibc's vector exp, 4 doubles per AVX2 call (core/fast/vector_math.hpp), within 4 ulp where the
// reference tier's std::exp is within 1, and summed in kExpBlock fixed lanes. Each result is still
// rounded to float once, so the two tiers' float32 results differ by at most one float rounding
// (tests/ops/test_ops_tiers.cpp bounds it). The float64 kernels keep std::exp and one running sum,
// and agree with the reference bit for bit.
constexpr std::size_t kExpBlock = 8;  // a whole number of vectors of 2 and 4: no scalar remainder

// The row's largest element (the comparisons skip NaN as std::max does), in kExpBlock lanes when
// the row is contiguous: a maximum is exact in any order.
XG_KERNEL_CLONES float float_row_max(const float* x, std::size_t len, std::size_t inner) {
    float lanes[kExpBlock];
    std::fill(lanes, lanes + kExpBlock, -std::numeric_limits<float>::infinity());
    std::size_t j = 0;
    if (inner == 1) {
        for (; j + kExpBlock <= len; j += kExpBlock) {
#pragma omp simd
            for (std::size_t k = 0; k < kExpBlock; ++k) lanes[k] = lanes[k] < x[j + k] ? x[j + k] : lanes[k];
        }
    }
    float m = -std::numeric_limits<float>::infinity();
    for (; j < len; ++j) m = m < x[j * inner] ? x[j * inner] : m;
    for (std::size_t k = 0; k < kExpBlock; ++k) m = m < lanes[k] ? lanes[k] : m;
    return m;
}

// e[j] = exp(e[j]) for j < n, n a multiple of kExpBlock: every element through the same vector
// code; returns the sum of the results, in kExpBlock lanes combined in a fixed order.
XG_KERNEL_INLINE double exp_and_sum(double* e, std::size_t n) {
    double lanes[kExpBlock] = {};
    for (std::size_t j = 0; j < n; j += kExpBlock) {
#pragma omp simd
        for (std::size_t k = 0; k < kExpBlock; ++k) {
            e[j + k] = detail::simd_exp(e[j + k]);
            lanes[k] += e[j + k];
        }
    }
    return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

XG_KERNEL_CLONES void exp_in_place(double* e, std::size_t n) { exp_and_sum(e, n); }

// The thread's scratch row for `len` values, padded to a multiple of kExpBlock.
std::vector<double>& scratch_row(std::size_t len) {
    static thread_local std::vector<double> e;
    e.resize((len + kExpBlock - 1) / kExpBlock * kExpBlock);
    return e;
}

// e[j] = exp(x_j - m) for the row's j < len, and 0 = exp(-inf) in the padding; returns sum_j e[j].
XG_KERNEL_CLONES double shifted_exp_sum(const float* x, std::size_t len, std::size_t inner, double m, std::vector<double>& scratch) {
    double* e = scratch.data();
    if (inner == 1) {
        for (std::size_t j = 0; j < len; ++j) e[j] = static_cast<double>(x[j]) - m;
    } else {
        for (std::size_t j = 0; j < len; ++j) e[j] = static_cast<double>(x[j * inner]) - m;
    }
    std::fill(e + len, e + scratch.size(), -std::numeric_limits<double>::infinity());
    return exp_and_sum(e, scratch.size());
}

// out_j = e_j / s, rounded to float once.
XG_KERNEL_CLONES void store_quotients(const double* e, std::size_t len, double s, float* out, std::size_t inner) {
    if (inner == 1) {
#pragma omp simd
        for (std::size_t j = 0; j < len; ++j) out[j] = static_cast<float>(e[j] / s);
    } else {
        for (std::size_t j = 0; j < len; ++j) out[j * inner] = static_cast<float>(e[j] / s);
    }
}

// softmax's backward on a contiguous float32 row (inner == 1): dot = sum_j g_j y_j in double, in
// kExpBlock lanes (so its rounding differs from the reference's running sum: the tier test bounds
// it), then dx_j = y_j (g_j - dot), rounded to float once.
XG_KERNEL_CLONES void softmax_backward_row(const float* y, const float* g, float* dx, std::size_t len) {
    double lanes[kExpBlock] = {};
    std::size_t j = 0;
    for (; j + kExpBlock <= len; j += kExpBlock) {
#pragma omp simd
        for (std::size_t k = 0; k < kExpBlock; ++k) lanes[k] += static_cast<double>(g[j + k]) * y[j + k];
    }
    double dot = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
    for (; j < len; ++j) dot += static_cast<double>(g[j]) * y[j];
#pragma omp simd
    for (std::size_t i = 0; i < len; ++i) dx[i] = static_cast<float>(static_cast<double>(y[i]) * (g[i] - dot));
}

// exp(z), the same bits: below -746 exp rounds to +0 (its smallest subnormal is exp(-744.4)), and
// there glibc's exp takes its underflow path (10 ns a call here, 3.8 ns in range); a causal mask's lowest()
// scores put half of an attention row there.
inline double exp_or_zero(double z) { return z < -746.0 ? 0.0 : std::exp(z); }

}  // namespace

// out = (x - max) - log(sum(exp(x - max))) per row.
template <class T>
void log_softmax_forward(const T* px, T* po, std::size_t outer, std::size_t len, std::size_t inner) {
    if constexpr (std::is_same_v<T, bfloat16>) {  // bfloat16 rows: the reference loops (double arithmetic, one store)
        return reference::log_softmax_forward(px, po, outer, len, inner);
    }
    const AxisView v{outer, len, inner};
    for_each_row(v, [&](std::size_t base) {
        double m = 0.0, s = 0.0;
        if constexpr (std::is_same_v<T, double>) {
            m = row_max(px, base, v);
            for (std::size_t j = 0; j < v.len; ++j) s += exp_or_zero(px[base + j * v.inner] - m);
        } else if constexpr (std::is_same_v<T, float>) {
            m = float_row_max(px + base, v.len, v.inner);
            s = shifted_exp_sum(px + base, v.len, v.inner, m, scratch_row(v.len));
        }
        // (x - max) - log(s), not x - (max + log(s)): rounding max + log(s) at |x| ~ 1000 costs ~1e-13.
        const double log_s = std::log(s);
        for (std::size_t j = 0; j < v.len; ++j) {
            po[base + j * v.inner] = static_cast<T>((static_cast<double>(px[base + j * v.inner]) - m) - log_s);
        }
    });
}

// out = exp(x - max) / sum(exp(x - max)) per row. Not exp(log_softmax): subtracting the
// log-sum-exp at |x| ~ 1000 costs ulp(1000) ~ 1e-13 relative, while x - max is exact nearby.
// A float32 row keeps its exponentials in the double scratch row, so each output is rounded once,
// after the division.
template <class T>
void softmax_forward(const T* px, T* po, std::size_t outer, std::size_t len, std::size_t inner) {
    if constexpr (std::is_same_v<T, bfloat16>) {  // bfloat16 rows: the reference loops (double arithmetic, one store)
        return reference::softmax_forward(px, po, outer, len, inner);
    }
    const AxisView v{outer, len, inner};
    for_each_row(v, [&](std::size_t base) {
        if constexpr (std::is_same_v<T, double>) {
            const double m = row_max(px, base, v);
            double s = 0.0;
            for (std::size_t j = 0; j < v.len; ++j) {
                const std::size_t k = base + j * v.inner;
                po[k] = exp_or_zero(px[k] - m);
                s += po[k];
            }
            for (std::size_t j = 0; j < v.len; ++j) po[base + j * v.inner] /= s;
        } else if constexpr (std::is_same_v<T, float>) {
            std::vector<double>& e = scratch_row(v.len);
            const double s = shifted_exp_sum(px + base, v.len, v.inner, float_row_max(px + base, v.len, v.inner), e);
            store_quotients(e.data(), v.len, s, po + base, v.inner);
        }
    });
}

// g_in = y * (g - sum_j g_j y_j) per row
template <class T>
void softmax_backward(const T* py, const T* pg, T* pr, std::size_t outer, std::size_t len, std::size_t inner) {
    if constexpr (std::is_same_v<T, bfloat16>) {  // bfloat16 rows: the reference loops (double arithmetic, one store)
        return reference::softmax_backward(py, pg, pr, outer, len, inner);
    }
    const AxisView v{outer, len, inner};
    for_each_row(v, [&](std::size_t base) {
        if constexpr (std::is_same_v<T, float>) {
            if (v.inner == 1) return softmax_backward_row(py + base, pg + base, pr + base, v.len);
        }
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
    if constexpr (std::is_same_v<T, bfloat16>) {  // bfloat16 rows: the reference loops (double arithmetic, one store)
        return reference::log_softmax_backward(py, pg, pr, outer, len, inner);
    }
    const AxisView v{outer, len, inner};
    for_each_row(v, [&](std::size_t base) {
        double total = 0.0;
        for (std::size_t j = 0; j < v.len; ++j) total += pg[base + j * v.inner];
        if constexpr (std::is_same_v<T, double>) {
            for (std::size_t j = 0; j < v.len; ++j) {
                const std::size_t k = base + j * v.inner;
                pr[k] = pg[k] - std::exp(py[k]) * total;
            }
        } else if constexpr (std::is_same_v<T, float>) {
            std::vector<double>& e = scratch_row(v.len);
            for (std::size_t j = 0; j < v.len; ++j) e[j] = py[base + j * v.inner];
            std::fill(e.begin() + static_cast<std::ptrdiff_t>(v.len), e.end(), 0.0);
            exp_in_place(e.data(), e.size());
            for (std::size_t j = 0; j < v.len; ++j) {
                const std::size_t k = base + j * v.inner;
                pr[k] = static_cast<T>(pg[k] - e[j] * total);
            }
        }
    });
}

#define XG_SOFTMAX_KERNELS(T)                                                                                   \
    template void softmax_forward<T>(const T*, T*, std::size_t, std::size_t, std::size_t);                    \
    template void softmax_backward<T>(const T*, const T*, T*, std::size_t, std::size_t, std::size_t);         \
    template void log_softmax_forward<T>(const T*, T*, std::size_t, std::size_t, std::size_t);                \
    template void log_softmax_backward<T>(const T*, const T*, T*, std::size_t, std::size_t, std::size_t);
XG_FOR_EACH_STORAGE_TYPE(XG_SOFTMAX_KERNELS)
#undef XG_SOFTMAX_KERNELS

}  // namespace xg::fast
