// The speed machinery of the normalisation kernels (nn/fast/layer_norm.cpp, rms_norm.cpp,
// batch_norm.cpp, group_norm.cpp; running_max: attention's largest score), as a few named primitives, so that each kernel body reads like its
// derivation (docs/derivations/). A learner can skip this file: every primitive does what its
// one-line description says, with plain-loop semantics. What each one bought, measured:
// docs/performance.md, "The figures behind nn/fast/kernel_primitives.hpp".
//
//   XG_KERNEL_CLONES     compile a kernel for SSE2 and for AVX2; the loader picks one per CPU
//   row_sum, row_sums    sum of n terms (one or two at once), in kLanes fixed partial sums
//   row_mean_var         mean and biased variance of a row (corrected two-pass)
//   row_sums_float       row_sums of float terms: float sums of a few terms, flushed into double
//   row_mean_var_float   row_mean_var with float arithmetic and those sums (float32 LN)
//   float_row_in_range   whether a float row's statistics let it stay in float arithmetic
//   ColumnSums           dw, db: per column over rows, double, or float blocks of rows into double
//   OutputStore          out[j] = value(j) for j < n (BasicOutputStore<float>: float outputs);
//                        large outputs bypass the cache, and
//                        long rows fetch the kernel's next input rows (NextRow) meanwhile
//   ChannelLayout        (N, C, L): BatchNorm's channels, each in N segments of length L
//   channel_sums         per channel, the sums of terms over its N L values
//   channel_map          out[k] = value(c, k) for every element k of every channel c (rows last to first)
//   running_max          the largest of n values, as one running maximum finds it, in kLanes maxima
//
// The clones must round like the plain build: nothing here contracts into an FMA (the clone has
// none, and ISO -std=c++17 means -ffp-contract=off), and every sum keeps kLanes partial sums
// whatever the vector width; a `#pragma omp simd reduction` would not. tests/clones checks it
// (ctest -L kernels).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "core/engine/bfloat16.hpp"
#include "core/fast/kernel_clones.hpp"
#include "core/fast/parallel.hpp"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace xg::nn::detail {

// ---- sums -------------------------------------------------------------------------------------

// A single accumulator is one dependency chain, bound by the latency of an add.
constexpr std::size_t kLanes = 8;

inline double combine(const double (&acc)[kLanes]) {
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/// {sum_j a_j, sum_j b_j} for j < n, where term(j) returns the pair {a_j, b_j} (and may write
/// element j elsewhere).
template <class Term>
XG_KERNEL_INLINE std::pair<double, double> row_sums(std::size_t n, Term&& term) {
    double a[kLanes] = {}, b[kLanes] = {};
    std::size_t j = 0;
    for (; j + kLanes <= n; j += kLanes) {
#pragma omp simd
        for (std::size_t k = 0; k < kLanes; ++k) {
            const std::pair<double, double> t = term(j + k);
            a[k] += t.first;
            b[k] += t.second;
        }
    }
    double tail_a = 0.0, tail_b = 0.0;
    for (; j < n; ++j) {
        const std::pair<double, double> t = term(j);
        tail_a += t.first;
        tail_b += t.second;
    }
    return {combine(a) + tail_a, combine(b) + tail_b};
}

/// sum_j a_j for j < n, where term(j) returns a_j.
template <class Term>
XG_KERNEL_INLINE double row_sum(std::size_t n, Term&& term) {
    return row_sums(n, [&term](std::size_t j) { return std::pair<double, double>{term(j), 0.0}; }).first;
}

/// Mean and biased variance of the n values at x, by the corrected two-pass algorithm
/// (docs/derivations/layernorm.md, Numerics): m = sum(x)/n, then the deviations d = x - m give
/// mean = m + sum(d)/n and var = (sum(d^2) - sum(d)^2/n)/n.
/// The sums are double whatever the storage type T (docs/precision.md, "Accumulators").
template <class T>
XG_KERNEL_INLINE void row_mean_var(const T* x, std::size_t n, double& mean, double& var) {
    const double count = static_cast<double>(n);
    const double m = row_sum(n, [x](std::size_t j) { return double(x[j]); }) / count;
    const auto [sum_d, sum_d2] = row_sums(n, [x, m](std::size_t j) {
        const double d = double(x[j]) - m;
        return std::pair{d, d * d};
    });
    var = std::max(0.0, (sum_d2 - sum_d * sum_d / count) / count);
    mean = m + sum_d / count;
}

// ---- maxima -----------------------------------------------------------------------------------

/// max_i z_i for i < n (-inf for n = 0) as one running maximum `m < z_i ? z_i : m` finds it (a NaN
/// is skipped), computed in kLanes running maxima: one maximum is a chain of dependent compares
/// (~0.4 ms for the scores of the Pre-LN bench row, issue 28). The lanes' maximum is the running
/// one's whatever the order, except for the sign of a zero maximum, which one plain pass settles.
template <class T>
T running_max(const T* z, std::size_t n) {
    T lanes[kLanes];
    std::fill(lanes, lanes + kLanes, -std::numeric_limits<T>::infinity());
    std::size_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
        for (std::size_t k = 0; k < kLanes; ++k) lanes[k] = lanes[k] < z[i + k] ? z[i + k] : lanes[k];
    }
    T largest = -std::numeric_limits<T>::infinity();
    for (; i < n; ++i) largest = largest < z[i] ? z[i] : largest;
    for (std::size_t k = 0; k < kLanes; ++k) largest = largest < lanes[k] ? lanes[k] : largest;
    if (largest == 0) {  // +0 or -0: the first zero in order, as one running maximum finds it
        largest = -std::numeric_limits<T>::infinity();
        for (std::size_t j = 0; j < n; ++j) largest = largest < z[j] ? z[j] : largest;
    }
    return largest;
}

// ---- float arithmetic, double sums (the float32 LayerNorm and RMSNorm) -------------------------

// The float32 kernels compute their terms in float (8 lanes per AVX2 vector instead of 4) but sum
// them in double: each of kFloatLanes lanes adds kFloatBlock consecutive terms in float, then the
// block's lane sums are added into double lane sums. A block's float sum of 8 terms is off by at
// most 7 u of its terms' magnitudes (u = 2^-24); nothing grows with the row's length
// (docs/precision.md, "Accumulators").
constexpr std::size_t kFloatLanes = 16;
constexpr std::size_t kFloatBlock = 8;

/// row_sums for terms that return a pair of floats: {sum_j a_j, sum_j b_j} in double, each term
/// first summed with at most kFloatBlock - 1 others in float.
template <class Term>
XG_KERNEL_INLINE std::pair<double, double> row_sums_float(std::size_t n, Term&& term) {
    double a[kFloatLanes] = {}, b[kFloatLanes] = {};
    constexpr std::size_t kStep = kFloatLanes * kFloatBlock;
    std::size_t j = 0;
    for (; j + kStep <= n; j += kStep) {
        float fa[kFloatLanes] = {}, fb[kFloatLanes] = {};
        for (std::size_t i = 0; i < kFloatBlock; ++i) {
#pragma omp simd
            for (std::size_t k = 0; k < kFloatLanes; ++k) {
                const std::pair<float, float> t = term(j + i * kFloatLanes + k);
                fa[k] += t.first;
                fb[k] += t.second;
            }
        }
#pragma omp simd
        for (std::size_t k = 0; k < kFloatLanes; ++k) {
            a[k] += double(fa[k]);
            b[k] += double(fb[k]);
        }
    }
    // the rest: kFloatLanes terms at a time straight into the double lanes, then one by one
    for (; j + kFloatLanes <= n; j += kFloatLanes) {
#pragma omp simd
        for (std::size_t k = 0; k < kFloatLanes; ++k) {
            const std::pair<float, float> t = term(j + k);
            a[k] += double(t.first);
            b[k] += double(t.second);
        }
    }
    double tail_a = 0.0, tail_b = 0.0;
    for (; j < n; ++j) {
        const std::pair<float, float> t = term(j);
        tail_a += double(t.first);
        tail_b += double(t.second);
    }
    double sum_a = 0.0, sum_b = 0.0;
    for (std::size_t k = 0; k < kFloatLanes; ++k) sum_a += a[k], sum_b += b[k];
    return {sum_a + tail_a, sum_b + tail_b};
}

/// row_sum for terms that return a float (see row_sums_float).
template <class Term>
XG_KERNEL_INLINE double row_sum_float(std::size_t n, Term&& term) {
    return row_sums_float(n, [&term](std::size_t j) { return std::pair<float, float>{term(j), 0.0f}; }).first;
}

/// A double c as the float pair hi + lo (hi = c rounded, lo = the rest rounded): x - hi - lo in float
/// is x - c with one rounding of about u |x - c| more, whatever |c| (x - hi is exact when x is near c),
/// where x - float(c) would carry u |c|: the float kernels' centring, x - mean.
struct FloatPair {
    float hi, lo;
    explicit FloatPair(double c) : hi(static_cast<float>(c)), lo(static_cast<float>(c - double(hi))) {}
};

/// Whether a float row's statistics let its arithmetic stay in float: finite (no float sum of the
/// row overflowed) and 1 / rstd at most 2^64, since deviations beyond that square beyond float's
/// range (FLT_MAX ~ 2^128). Other rows compute in double, as the reference kernels do: the float
/// kernels of LayerNorm (mean, rstd) and RMSNorm (0, rrms) ask it in both directions.
XG_KERNEL_INLINE bool float_row_in_range(double mean, double rstd) { return std::isfinite(mean) && rstd >= 0x1p-64; }

/// row_mean_var for a float row (or a bfloat16 one, widened) with float arithmetic and double
/// sums: the same corrected two passes, with d = (x - hi) - lo for the first pass's mean m = hi + lo.
template <class S>
XG_KERNEL_INLINE void row_mean_var_float(const S* x, std::size_t n, double& mean, double& var) {
    const double count = static_cast<double>(n);
    const FloatPair m(row_sum_float(n, [x](std::size_t j) { return float(x[j]); }) / count);
    const auto [sum_d, sum_d2] = row_sums_float(n, [x, m](std::size_t j) {
        const float d = (float(x[j]) - m.hi) - m.lo;
        return std::pair{d, d * d};
    });
    var = std::max(0.0, (sum_d2 - sum_d * sum_d / count) / count);
    mean = (double(m.hi) + double(m.lo)) + sum_d / count;
}

/// dw-style sums down the columns of a row kernel's rows (out[j] += the terms of column j, one per
/// row), as the kernels accumulate them: ColumnSums<double> adds into out as it goes;
/// ColumnSums<float> sums kFloatBlock rows in a float row of partial sums, then adds that into out
/// (double) - a float add instead of a widening and a double add per term, and at most 7 u of a
/// block's terms lost, nothing growing with the rows. row() is where the current row adds its
/// terms; end_row() after each row; the last partial sums reach out at flush() (or destruction).
template <class C>
class ColumnSums;

template <>
class ColumnSums<double> {
public:
    ColumnSums(double* out, std::size_t) : out_(out) {}
    double* row() const { return out_; }
    void end_row() {}
    void flush() {}

private:
    double* out_;
};

template <>
class ColumnSums<float> {
public:
    ColumnSums(double* out, std::size_t n) : out_(out), part_(out != nullptr ? n : 0, 0.0f) {}
    ColumnSums(const ColumnSums&) = delete;
    ColumnSums& operator=(const ColumnSums&) = delete;
    ~ColumnSums() { flush(); }
    XG_KERNEL_INLINE float* row() { return part_.empty() ? nullptr : part_.data(); }
    XG_KERNEL_INLINE void end_row() {
        if (++rows_ == kFloatBlock) flush();
    }
    XG_KERNEL_INLINE void flush() {
        if (rows_ == 0) return;
        float* p = part_.data();
#pragma omp simd
        for (std::size_t j = 0; j < part_.size(); ++j) {
            out_[j] += double(p[j]);
            p[j] = 0.0f;
        }
        rows_ = 0;
    }

private:
    double* out_;
    std::vector<float> part_;
    std::size_t rows_ = 0;
};

/// Rows of at most this many bytes are short: channel_sums and channel_map walk them one at a time,
/// in memory order (several short rows at once are several short streams, one row at a time is one
/// long stream: measured faster for rows of 2 KiB, not for rows of 6 KiB: docs/performance.md), and
/// OutputStore does not fetch the next one ahead.
constexpr std::size_t kShortRowBytes = std::size_t{4} << 10;

// ---- stores -----------------------------------------------------------------------------------

// Outputs of at least kStreamBytes are written with non-temporal (streaming) stores, which skip
// the read-for-ownership of every destination line; above a few MiB the output would not stay in
// cache for its consumer anyway. Smaller outputs (an MLP's activations) keep ordinary stores,
// which leave them in L1/L2 for the next op.
constexpr std::size_t kStreamBytes = std::size_t{4} << 20;

/// Whether an output of `total` elements, written in pieces of `piece` elements, streams: large
/// enough, and every piece starts 16-byte aligned (an SSE2 streaming store needs that; glibc's
/// malloc gives it for the array, a piece of a multiple of 16 bytes for every piece).
template <class T>
inline bool streams(const T* out, std::size_t total, std::size_t piece) {
#if defined(__SSE2__)
    return out != nullptr && total * sizeof(T) >= kStreamBytes && (piece * sizeof(T)) % 16 == 0 &&
           reinterpret_cast<std::uintptr_t>(out) % 16 == 0;
#else
    (void)out, (void)total, (void)piece;
    return false;
#endif
}

/// The next rows of a row kernel's inputs (up to two arrays, null for none), for OutputStore to
/// fetch while it writes the current row. LayerNorm's backward passes them; its forward and
/// RMSNorm's kernels do not (measured no faster, or slower: docs/performance.md).
template <class T>
struct BasicNextRow {
    const T* a = nullptr;
    const T* b = nullptr;
};
using NextRow = BasicNextRow<double>;

/// Row r + 1 of x and of g in rows of width D, or none when r is the last of the rows [.., end).
template <class T>
inline BasicNextRow<T> next_row(const T* x, const T* g, std::size_t r, std::size_t end, std::size_t D) {
    return r + 1 < end ? BasicNextRow<T>{x + (r + 1) * D, g + (r + 1) * D} : BasicNextRow<T>{};
}

#if defined(__SSE2__)
/// A streaming store of the 16 bytes at v to p (16-byte aligned).
inline void stream16(double* p, const double* v) { _mm_stream_pd(p, _mm_loadu_pd(v)); }
inline void stream16(float* p, const float* v) { _mm_stream_ps(p, _mm_loadu_ps(v)); }
inline void stream16(bfloat16* p, const bfloat16* v) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(p), _mm_loadu_si128(reinterpret_cast<const __m128i*>(v)));
}
#endif

/// An element-wise float kernel, kernel(in..., out, count), run on bfloat16 storage: blocks of
/// the inputs widened (exactly) into float, the kernel's float results rounded once into out. The
/// arithmetic is the float kernel's, so bfloat16 gets float's results rounded to bfloat16.
template <std::size_t... J, class Kernel, class... In>
void on_float_blocks_of(std::index_sequence<J...>, std::size_t n, bfloat16* out, Kernel&& kernel, const In*... in) {
    constexpr std::size_t kBlock = 256;
    float wide[sizeof...(In)][kBlock];
    float result[kBlock];
    const bfloat16* const inputs[sizeof...(In)] = {in...};
    for (std::size_t i0 = 0; i0 < n; i0 += kBlock) {
        const std::size_t m = std::min(kBlock, n - i0);
        for (std::size_t k = 0; k < sizeof...(In); ++k) {
            for (std::size_t j = 0; j < m; ++j) wide[k][j] = static_cast<float>(inputs[k][i0 + j]);
        }
        kernel(static_cast<const float*>(wide[J])..., result, m);
        for (std::size_t j = 0; j < m; ++j) out[i0 + j] = bfloat16(result[j]);
    }
}
template <class Kernel, class... In>
void on_float_blocks(std::size_t n, bfloat16* out, Kernel&& kernel, const In*... in) {
    on_float_blocks_of(std::index_sequence_for<In...>{}, n, out, kernel, in...);
}

/// Writes a kernel's output, `total` elements starting at `out`, in pieces of `piece` elements:
/// store(p, n, value) sets p[j] = value(j) for j < n. Streams large outputs past the cache (see
/// streams()) and orders those stores before whatever follows when it goes out of scope.
/// store(p, n, value, next) also fetches the rows at next.a and next.b (n elements each), one
/// 64-byte line per 64 bytes stored, when the output streams and its pieces are longer than
/// kShortRowBytes of doubles (512 values: chosen when the kernels computed in double whatever T, so
/// the time a row takes, which the fetch overlaps, went by its values, not its bytes; float rows of
/// 768 values ran 20-25 % faster with it, docs/performance.md; not re-measured since the float32
/// LayerNorm and RMSNorm kernels compute in float): a row kernel reads memory only in its first pass over a row, and while its
/// last pass writes from the cache the hardware prefetcher does not run a whole row ahead, so
/// memory would sit idle (measured: docs/performance.md; shorter or cache-resident rows were
/// slower with it). T is the output's storage type (double or float); value(j) may return a double,
/// rounded to T at the store.
template <class T>
class BasicOutputStore {
public:
    // One 64-byte cache line of T.
    static constexpr std::size_t kBlock = 64 / sizeof(T);

    BasicOutputStore(T* out, std::size_t total, std::size_t piece)
        : stream_(streams(out, total, piece)), prefetch_(stream_ && piece > kShortRowBytes / sizeof(double)) {}
    BasicOutputStore(const BasicOutputStore&) = delete;
    BasicOutputStore& operator=(const BasicOutputStore&) = delete;
    ~BasicOutputStore() {
#if defined(__SSE2__)
        if (stream_) _mm_sfence();
#endif
    }

    template <class F>
    XG_KERNEL_INLINE void operator()(T* p, std::size_t n, F&& value, BasicNextRow<T> next = {}) const {
        rows<1>(p, n, n, [&value](std::size_t, std::size_t j) { return value(j); }, next);
    }

    /// kRows rows of n elements, row q at p + q * stride: p[q * stride + j] = value(q, j). All
    /// kRows values of a column are computed before any is stored, so value's per-column loads
    /// (a channel's statistics) are shared by the rows.
    template <std::size_t kRows, class F>
    XG_KERNEL_INLINE void rows(T* p, std::size_t stride, std::size_t n, F&& value, BasicNextRow<T> next = {}) const {
        std::size_t j0 = 0;
#if defined(__SSE2__)
        if (stream_) {
            if (!prefetch_) next = {};
            constexpr std::size_t kPerStore = 16 / sizeof(T);
            for (; j0 + kBlock <= n; j0 += kBlock) {
                if (next.a != nullptr) __builtin_prefetch(next.a + j0);
                if (next.b != nullptr) __builtin_prefetch(next.b + j0);
                T v[kRows][kBlock];
#pragma omp simd
                for (std::size_t k = 0; k < kBlock; ++k) {
                    for (std::size_t q = 0; q < kRows; ++q) v[q][k] = T(value(q, j0 + k));
                }
                for (std::size_t q = 0; q < kRows; ++q) {
                    for (std::size_t k = 0; k < kBlock; k += kPerStore) stream16(p + q * stride + j0 + k, &v[q][k]);
                }
            }
        }
#else
        (void)next;
#endif
#pragma omp simd
        for (std::size_t j = j0; j < n; ++j) {
            T v[kRows];
            for (std::size_t q = 0; q < kRows; ++q) v[q] = T(value(q, j));
            for (std::size_t q = 0; q < kRows; ++q) p[q * stride + j] = v[q];
        }
    }

private:
    bool stream_, prefetch_;
};
using OutputStore = BasicOutputStore<double>;

// ---- BatchNorm's channels -----------------------------------------------------------------------

/// (N, C, L): channel c's N L values sit in N contiguous segments of length L, element
/// k = (n C + c) L + l. A 2-D input (N, C) has L = 1.
/// A share of the input (one thread's rows, core/fast/parallel.hpp) is the rows [first, first + n) of
/// an input of `total` rows (total = 0: the layout is the whole input).
struct ChannelLayout {
    std::size_t n = 0, channels = 0, length = 1;
    std::size_t first = 0, total = 0;
    std::size_t per_channel() const { return n * length; }
    std::size_t input_size() const { return (total != 0 ? total : n) * channels * length; }  // elements of the whole input
    ChannelLayout rows(std::size_t begin, std::size_t end) const {
        return {end - begin, channels, length, first + begin, total != 0 ? total : n};
    }
};

/// sum_a[c] += sum of a_k, sum_b[c] += sum of b_k over the elements k of channel c, where
/// term(c, k) returns {a_k, b_k}. With L > 1 only the channels [c_begin, c_end) (a thread's share;
/// each channel's sum still runs over its segments in order). Walks memory in order: with L = 1 across a row's channels,
/// kRowsAtOnce rows per update of the sums (callers pick it so that about eight rows stream in:
/// 8 for a term over x, 4 over x and dy) unless the rows are short (one at a time); otherwise
/// segment by segment along L.
inline bool short_rows(std::size_t channels) { return channels * sizeof(double) <= kShortRowBytes; }

template <std::size_t kRowsAtOnce, class Term>
XG_KERNEL_INLINE void channel_sums(const ChannelLayout& l, double* sum_a, double* sum_b, Term&& term, std::size_t c_begin = 0,
                                   std::size_t c_end = SIZE_MAX) {
    const std::size_t C = l.channels, L = l.length;
    if (L == 1) {
        std::size_t i = 0;
        for (; !short_rows(C) && i + kRowsAtOnce <= l.n; i += kRowsAtOnce) {
            const std::size_t row = (l.first + i) * C;
#pragma omp simd
            for (std::size_t c = 0; c < C; ++c) {
                double a = 0.0, b = 0.0;
                for (std::size_t q = 0; q < kRowsAtOnce; ++q) {
                    const std::pair<double, double> t = term(c, row + q * C + c);
                    a += t.first;
                    b += t.second;
                }
                sum_a[c] += a;
                sum_b[c] += b;
            }
        }
        for (; i < l.n; ++i) {
            const std::size_t row = (l.first + i) * C;
#pragma omp simd
            for (std::size_t c = 0; c < C; ++c) {
                const std::pair<double, double> t = term(c, row + c);
                sum_a[c] += t.first;
                sum_b[c] += t.second;
            }
        }
        return;
    }
    for (std::size_t i = 0; i < l.n; ++i) {
        for (std::size_t c = c_begin; c < std::min(c_end, C); ++c) {
            const std::size_t segment = ((l.first + i) * C + c) * L;
            const auto [a, b] = row_sums(L, [&term, c, segment](std::size_t j) { return term(c, segment + j); });
            sum_a[c] += a;
            sum_b[c] += b;
        }
    }
}

/// store(p, n, value), walking the row from its end in blocks of 8.
template <class T, class F>
XG_KERNEL_INLINE void store_from_the_end(const BasicOutputStore<T>& store, T* p, std::size_t n, F&& value) {
    std::size_t j0 = n;
    for (; j0 >= 8; j0 -= 8) store(p + j0 - 8, 8, [&value, j0](std::size_t j) { return value(j0 - 8 + j); });
    if (j0 > 0) store(p, j0, value);
}

/// channel_map's walk for L = 1: l's rows from the last to the first, kRows at a time (each row
/// from its start) and the rows left over one at a time (each from its end).
template <std::size_t kRows, class T, class F>
XG_KERNEL_INLINE void map_rows_from_the_last(const BasicOutputStore<T>& store, const ChannelLayout& l, T* out, F&& value) {
    const std::size_t C = l.channels;
    std::size_t i = l.n;
    for (; kRows > 1 && i >= kRows; i -= kRows) {
        const std::size_t row = (l.first + i - kRows) * C;
        store.template rows<kRows>(out + row, C, C, [&](std::size_t q, std::size_t c) { return value(c, row + q * C + c); });
    }
    for (; i > 0; --i) {
        const std::size_t row = (l.first + i - 1) * C;
        store_from_the_end(store, out + row, C, [&](std::size_t c) { return value(c, row + c); });
    }
}

/// out[k] = value(c, k) for every element k of every channel c of l's rows (out is the whole
/// output), through an OutputStore. With L = 1 the rows go from the last to the first: a map
/// follows a channel_sums pass over the same rows, which walked forwards, so it begins on the rows
/// that pass left in the cache (BatchNorm's arrays are about the L3's size; measured 1-9 % faster:
/// docs/performance.md). Long rows go several at a time, so that value's per-channel loads are
/// shared by them (with C of them per array they otherwise compete with the rows for L1); but each
/// row is a stream of its own, and with both cores walking, four rows each ran 1.4-1.9x slower than two
/// (docs/performance.md): four rows when this thread walks alone, two when it is one of two, one
/// with more. Short rows go one at a time and each from its end, so that the walk is one
/// descending stream (short ascending pieces in descending order ran 2x slower). Whichever walk,
/// every element gets the same bits. T is the output's storage type (double or float): value may
/// return a double, rounded to T at the store.
template <class T, class F>
XG_KERNEL_INLINE void channel_map(const ChannelLayout& l, T* out, F&& value) {
    const std::size_t C = l.channels, L = l.length;
    const BasicOutputStore<T> store(out, l.input_size(), L == 1 ? C : L);
    if (L == 1) {
        const int walkers = xg::detail::threads_in_this_region();
        if (short_rows(C) || walkers > 2) {
            map_rows_from_the_last<1>(store, l, out, value);
        } else if (walkers == 2) {
            map_rows_from_the_last<2>(store, l, out, value);
        } else {
            map_rows_from_the_last<4>(store, l, out, value);
        }
        return;
    }
    for (std::size_t i = 0; i < l.n; ++i) {
        for (std::size_t c = 0; c < C; ++c) {
            const std::size_t segment = ((l.first + i) * C + c) * L;
            store(out + segment, L, [&](std::size_t j) { return value(c, segment + j); });
        }
    }
}

}  // namespace xg::nn::detail
