// Internal to nn/: what the normalisation kernels share - the input check that yields the row
// layout (layer_norm, rms_norm), row sums with independent partial accumulators, a row's mean
// and variance (layer_norm, group_norm), streaming stores for large outputs, and how the hot
// kernels are compiled.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <utility>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <fmt/format.h>

#include "core/tensor.hpp"

// A hot kernel marked XG_KERNEL_CLONES is compiled twice, for baseline x86-64 (SSE2) and for
// AVX2, and the dynamic loader picks one per machine (GCC function multi-versioning, an ifunc):
// the library still runs on any x86-64 CPU. AVX2 halves the instructions per element, which is
// what these loops are bound by while their rows sit in L1 (LayerNorm fwd+bwd at (4096, 768)
// 9.4 -> 8.4 ms here). The two versions round identically: nothing is contracted into an FMA
// (the clone has no FMA, and ISO -std=c++17 means -ffp-contract=off anyway), and every reduction
// keeps a fixed number of lanes (kLanes) whatever the vector width - a `#pragma omp simd
// reduction` would not. ctest kernels.avx2_clones_round_like_sse2 checks it (tests/clones/).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(XGRAD_NO_KERNEL_CLONES)
#define XG_KERNEL_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define XG_KERNEL_CLONES
#endif
// For the loop templates the clones call: GCC does not inline a large default-target function
// into an AVX2 clone by itself, and an out-of-line copy runs with SSE2 only.
#if defined(__GNUC__)
#define XG_KERNEL_INLINE inline __attribute__((always_inline))
#else
#define XG_KERNEL_INLINE inline
#endif

namespace xg::nn::detail {

/// The input seen as `rows` contiguous rows of `width` = prod(normalized_shape) elements.
struct RowLayout {
    std::size_t rows = 0, width = 0;
};

/// Checks that normalized_shape names x's trailing axes and that each given parameter (weight,
/// bias; undefined ones are skipped) has that shape; throws xg::Error naming `op` otherwise.
inline RowLayout check_rows(const char* op, const Tensor& x, const Shape& normalized_shape,
                            std::initializer_list<std::pair<const char*, const Tensor*>> parameters) {
    if (!x.defined()) fail(op, "input must be a defined tensor");
    const Shape sx = x.shape();
    const std::size_t k = normalized_shape.size();
    if (k == 0) fail(op, fmt::format("normalized_shape must name at least one axis (input {})", shape_str(sx)));
    if (sx.size() < k || !std::equal(normalized_shape.begin(), normalized_shape.end(), sx.end() - static_cast<long>(k))) {
        fail(op, fmt::format("normalized_shape {} does not match the trailing axes of input {}", shape_str(normalized_shape),
                             shape_str(sx)));
    }
    for (const auto& [name, p] : parameters) {
        if (p->defined() && p->shape() != normalized_shape) {
            fail(op, fmt::format("{} must have shape normalized_shape {}, got {} (input {})", name, shape_str(normalized_shape),
                                 shape_str(p->shape()), shape_str(sx)));
        }
    }
    RowLayout l;
    l.width = 1;
    for (std::size_t d : normalized_shape) l.width *= d;
    if (l.width == 0) fail(op, fmt::format("cannot normalise over an empty normalized_shape {}", shape_str(normalized_shape)));
    l.rows = x.numel() / l.width;
    return l;
}

// Row sums keep kLanes independent partial sums: a single accumulator is one dependency chain,
// latency-bound at one add per ~4 cycles (measured 2.5x slower at D = 768 than 8 lanes).
constexpr std::size_t kLanes = 8;

inline double combine(const double (&acc)[kLanes]) {
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/// sum_a = sum_j a_j, sum_b = sum_j b_j for j < n, where term(j, a, b) adds a_j to a and b_j to
/// b (and may write element j elsewhere).
template <class Term>
inline void row_sums(std::size_t n, double& sum_a, double& sum_b, Term&& term) {
    double a[kLanes] = {}, b[kLanes] = {};
    std::size_t j = 0;
    for (; j + kLanes <= n; j += kLanes) {
#pragma omp simd
        for (std::size_t k = 0; k < kLanes; ++k) term(j + k, a[k], b[k]);
    }
    double tail_a = 0.0, tail_b = 0.0;
    for (; j < n; ++j) term(j, tail_a, tail_b);
    sum_a = combine(a) + tail_a;
    sum_b = combine(b) + tail_b;
}

/// sum_j a_j for j < n, where term(j, a) adds a_j to a.
template <class Term>
inline double row_sum(std::size_t n, Term&& term) {
    double sum = 0.0, unused = 0.0;
    row_sums(n, sum, unused, [&term](std::size_t j, double& a, double&) { term(j, a); });
    return sum;
}

// Statistics of one row by the corrected two-pass algorithm: the second pass sums the
// deviations d = x - m as well as d^2; sum(d) is the rounding error of the first-pass mean, so
// mean = m + sum(d)/D is correct to the last bit on constant rows (output == beta exactly) and
// var = (sum(d^2) - sum(d)^2/D)/D is the usual centred sum minus that error's contribution.
/// Mean and biased variance of the n values at x (docs/derivations/layernorm.md, Numerics).
XG_KERNEL_INLINE void row_mean_var(const double* x, std::size_t n, double& mean, double& var) {
    const double m = row_sum(n, [x](std::size_t j, double& a) { a += x[j]; }) / static_cast<double>(n);
    double sd = 0.0, sd2 = 0.0;
    row_sums(n, sd, sd2, [x, m](std::size_t j, double& a, double& b) {
        const double d = x[j] - m;
        a += d;
        b += d * d;
    });
    var = std::max(0.0, (sd2 - sd * sd / static_cast<double>(n)) / static_cast<double>(n));
    mean = m + sd / static_cast<double>(n);
}

/// Mean and rstd = 1 / sqrt(var + eps) of the n values at x.
XG_KERNEL_INLINE void row_stats(const double* x, std::size_t n, double eps, double& mean, double& rstd) {
    double var = 0.0;
    row_mean_var(x, n, mean, var);
    rstd = 1.0 / std::sqrt(var + eps);
}

// Outputs of at least kStreamBytes are written with non-temporal (streaming) stores: an
// ordinary store first reads every line of the destination from memory (read-for-ownership),
// and above a few MiB the output would not stay in cache for its consumer anyway. Measured here,
// writing a 24 MiB output and reading it back: 3.8 -> 2.8 ms (8 MiB: 1.07 -> 0.85 ms); LayerNorm
// fwd+bwd at (4096, 768) 8.1 -> 6.7 ms in a standalone test. From 4 MiB (it was 8): outputs of
// 4-8 MiB gain the same, even when the next op reads them right away (docs/performance.md,
// "Streaming stores"). Small outputs (an MLP's batch of activations) keep ordinary stores, which
// leave them in L1/L2 for the next op.
constexpr std::size_t kStreamBytes = std::size_t{4} << 20;

/// Whether store_rows may stream into `out`, `total` elements in rows of `width`: large enough,
/// and every row starts 16-byte aligned (an SSE2 streaming store needs that; glibc's malloc
/// gives it for the array, an even width for every row).
inline bool streams(const double* out, std::size_t total, std::size_t width) {
#if defined(__SSE2__)
    return total * sizeof(double) >= kStreamBytes && width % 2 == 0 && reinterpret_cast<std::uintptr_t>(out) % 16 == 0;
#else
    (void)out, (void)total, (void)width;
    return false;
#endif
}

/// Writes kRows rows of n elements, row q at out + q * stride: out[q * stride + j] = value(q, j).
/// All kRows values of a column are computed before any is stored, so value's per-column loads
/// (a weight, a channel's statistics) are shared by the rows. With `stream` (see streams()) the
/// stores are non-temporal; call store_fence() once the kernel is done.
template <std::size_t kRows, class F>
XG_KERNEL_INLINE void store_rows(double* out, std::size_t stride, std::size_t n, bool stream, F&& value) {
    std::size_t j0 = 0;
#if defined(__SSE2__)
    if (stream) {
        for (; j0 + 8 <= n; j0 += 8) {
            double v[kRows][8];
#pragma omp simd
            for (std::size_t k = 0; k < 8; ++k) {
                for (std::size_t q = 0; q < kRows; ++q) v[q][k] = value(q, j0 + k);
            }
            for (std::size_t q = 0; q < kRows; ++q) {
                for (std::size_t k = 0; k < 8; k += 2) _mm_stream_pd(out + q * stride + j0 + k, _mm_loadu_pd(&v[q][k]));
            }
        }
    }
#endif
#pragma omp simd
    for (std::size_t j = j0; j < n; ++j) {
        double v[kRows];
        for (std::size_t q = 0; q < kRows; ++q) v[q] = value(q, j);
        for (std::size_t q = 0; q < kRows; ++q) out[q * stride + j] = v[q];
    }
}

/// Orders the streaming stores before whatever follows (another thread reading the output).
inline void store_fence() {
#if defined(__SSE2__)
    _mm_sfence();
#endif
}

}  // namespace xg::nn::detail
