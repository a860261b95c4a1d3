// BatchNorm's fast kernels: the per-channel loops of nn/reference/batch_norm.cpp rewritten for
// memory order with the primitives of nn/fast/kernel_primitives.hpp (channel_sums, channel_map:
// vectorised across channels or along L), a one-pass shifted variance, and thread splits that give
// the same bits at any thread count. One body per loop, a template on the storage type T (double,
// float), compiled into an AVX2 clone per type; the arithmetic is double whatever T (every value read
// is widened, y and dx rounded once at their store), so a float32 input gets the bits of the double
// kernels on its values, rounded once.
#include "nn/fast/batch_norm.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/fast/parallel.hpp"
#include "nn/fast/kernel_primitives.hpp"
#include "core/engine/dtype.hpp"

namespace xg::nn::fast {

namespace {

using detail::channel_map;
using detail::channel_sums;
using detail::ChannelLayout;

// Per channel, in one pass over x: d = x - K from a shift K = the channel's mean over the first
// rows (~256 KiB, still in cache), so that sum(d^2) keeps its digits (docs/derivations/batchnorm.md);
// mean = K + sum(d)/M, var = (sum(d^2) - sum(d)^2/M)/M (biased). The first rows are counted in
// doubles whatever T, so that a float input takes the shift (and the statistics' bits) of its
// float64 values.
constexpr std::size_t kFirstBlockBytes = std::size_t{256} << 10;
template <class T>
XG_KERNEL_INLINE void channel_shift_of(const T* x, double* K, const ChannelLayout& first) {
    std::vector<double> unused(first.channels, 0.0);
    channel_sums<8>(first, K, unused.data(), [x](std::size_t, std::size_t k) { return std::pair{double(x[k]), 0.0}; });
    for (std::size_t c = 0; c < first.channels; ++c) K[c] /= static_cast<double>(first.per_channel());
}
// sum(d) and sum(d^2) over the rows of a share (with L > 1: of the channels [c0, c1))
template <class T>
XG_KERNEL_INLINE void centered_sums_of(const T* x, const double* K, double* sum_d, double* sum_d2, const ChannelLayout& share,
                                       std::size_t c0, std::size_t c1) {
    channel_sums<8>(share, sum_d, sum_d2, [x, K](std::size_t c, std::size_t k) {
        const double d = double(x[k]) - K[c];
        return std::pair{d, d * d};
    }, c0, c1);
}
// The clones: one per storage type (GCC's target_clones takes no templates).
XG_KERNEL_CLONES void channel_shift(const double* x, double* K, const ChannelLayout& first) { channel_shift_of(x, K, first); }
XG_KERNEL_CLONES void channel_shift(const float* x, double* K, const ChannelLayout& first) { channel_shift_of(x, K, first); }
XG_KERNEL_CLONES void centered_sums(const double* x, const double* K, double* sum_d, double* sum_d2, const ChannelLayout& share,
                                    std::size_t c0, std::size_t c1) {
    centered_sums_of(x, K, sum_d, sum_d2, share, c0, c1);
}
XG_KERNEL_CLONES void centered_sums(const float* x, const double* K, double* sum_d, double* sum_d2, const ChannelLayout& share,
                                    std::size_t c0, std::size_t c1) {
    centered_sums_of(x, K, sum_d, sum_d2, share, c0, c1);
}
// bfloat16 only stores: the same double arithmetic (not cloned: no speed claim yet).
void channel_shift(const bfloat16* x, double* K, const ChannelLayout& first) { channel_shift_of(x, K, first); }
void centered_sums(const bfloat16* x, const double* K, double* sum_d, double* sum_d2, const ChannelLayout& share, std::size_t c0,
                   std::size_t c1) {
    centered_sums_of(x, K, sum_d, sum_d2, share, c0, c1);
}

// Per-channel sums shared between threads with the same bits at any count (core/fast/parallel.hpp):
// (N, C, L > 1) by channels - each channel's sum is one thread's, over its segments in order;
// (N, C) by fixed chunks of rows, whose partials are added in chunk order.
// sums(share, c0, c1, part_a, part_b) adds the share's terms into the partials.
template <class Sums>
void per_channel_sums(const ChannelLayout& l, double* sum_a, double* sum_b, Sums&& sums) {
    const std::size_t C = l.channels;
    if (l.length > 1) {
        xg::detail::parallel_for(C, l.n * l.length, [&](std::size_t c0, std::size_t c1) { sums(l, c0, c1, sum_a, sum_b); });
        return;
    }
    xg::detail::sums_over_chunks(l.n, C, C, sum_a, sum_b, [&](std::size_t i0, std::size_t i1, double* part_a, double* part_b) {
        sums(l.rows(i0, i1), std::size_t{0}, C, part_a, part_b);
    });
}
template <class T>
void batch_mean_var(const T* x, double* mean, double* var, const ChannelLayout& l) {
    const std::size_t C = l.channels;
    const double M = static_cast<double>(l.per_channel());
    const std::size_t first_rows = std::clamp<std::size_t>(kFirstBlockBytes / (sizeof(double) * C * l.length), 1, l.n);
    std::vector<double> K(C, 0.0), sum_d(C, 0.0), sum_d2(C, 0.0);
    channel_shift(x, K.data(), ChannelLayout{first_rows, C, l.length});
    per_channel_sums(l, sum_d.data(), sum_d2.data(), [&](const ChannelLayout& share, std::size_t c0, std::size_t c1, double* d, double* d2) {
        centered_sums(x, K.data(), d, d2, share, c0, c1);
    });
    for (std::size_t c = 0; c < C; ++c) {
        mean[c] = K[c] + sum_d[c] / M;
        var[c] = std::max(0.0, (sum_d2[c] - sum_d[c] * sum_d[c] / M) / M);
    }
}

// Per channel c: xhat = (x - mean_c) rstd_c, y = xhat w_c + b_c = (x - mean_c) scale_c + b_c with
// scale_c = rstd_c w_c (three per-channel vectors instead of four: they share L1 with the rows).
template <class T>
XG_KERNEL_INLINE void batch_norm_forward_rows_of(const T* x, const double* scale, const T* b, const double* mean, T* y,
                                                 const ChannelLayout& share) {
    channel_map(share, y, [=](std::size_t c, std::size_t k) { return (double(x[k]) - mean[c]) * scale[c] + double(b[c]); });
}

// With g = dL/dy, per channel c: db_c = sum g, dw_c = sum g xhat (pass 1) and (pass 2)
//   training: dx = w_c rstd_c (g - mean(g) - xhat mean(g xhat))
//   eval:     dx = w_c rstd_c g   (the statistics are constants: mean(g), mean(g xhat) drop out)
// sum g xhat = rstd_c sum g (x - mean_c): one rounding of rstd per channel, not per term.
template <class T>
XG_KERNEL_INLINE void grad_sums_of(const T* x, const T* g, const double* mean, double* sum_g, double* sum_g_xc,
                                   const ChannelLayout& share, std::size_t c0, std::size_t c1) {
    channel_sums<4>(share, sum_g, sum_g_xc, [=](std::size_t c, std::size_t k) {
        const double g_k = g[k];
        return std::pair{g_k, g_k * (double(x[k]) - mean[c])};
    }, c0, c1);
}
// With xhat = (x - mean) rstd the training formula is dx = w_rstd (g - mean(g)) - slope (x - mean)
// for w_rstd = w rstd, slope = w_rstd rstd mean(g xhat): four per-channel vectors instead of five.
template <class T>
XG_KERNEL_INLINE void input_grad_rows_of(const T* x, const T* g, const double* mean, const double* w_rstd, const double* mean_g,
                                         const double* slope, T* dx, const ChannelLayout& share) {
    channel_map(share, dx, [=](std::size_t c, std::size_t k) {
        return w_rstd[c] * (double(g[k]) - mean_g[c]) - slope[c] * (double(x[k]) - mean[c]);
    });
}

// The clones of the loops above, one per storage type.
XG_KERNEL_CLONES void batch_norm_forward_rows(const double* x, const double* scale, const double* b, const double* mean, double* y,
                                              const ChannelLayout& share) {
    batch_norm_forward_rows_of(x, scale, b, mean, y, share);
}
XG_KERNEL_CLONES void batch_norm_forward_rows(const float* x, const double* scale, const float* b, const double* mean, float* y,
                                              const ChannelLayout& share) {
    batch_norm_forward_rows_of(x, scale, b, mean, y, share);
}
XG_KERNEL_CLONES void grad_sums(const double* x, const double* g, const double* mean, double* sum_g, double* sum_g_xc,
                                const ChannelLayout& share, std::size_t c0, std::size_t c1) {
    grad_sums_of(x, g, mean, sum_g, sum_g_xc, share, c0, c1);
}
XG_KERNEL_CLONES void grad_sums(const float* x, const float* g, const double* mean, double* sum_g, double* sum_g_xc,
                                const ChannelLayout& share, std::size_t c0, std::size_t c1) {
    grad_sums_of(x, g, mean, sum_g, sum_g_xc, share, c0, c1);
}
XG_KERNEL_CLONES void input_grad_rows(const double* x, const double* g, const double* mean, const double* w_rstd, const double* mean_g,
                                      const double* slope, double* dx, const ChannelLayout& share) {
    input_grad_rows_of(x, g, mean, w_rstd, mean_g, slope, dx, share);
}
XG_KERNEL_CLONES void input_grad_rows(const float* x, const float* g, const double* mean, const double* w_rstd, const double* mean_g,
                                      const double* slope, float* dx, const ChannelLayout& share) {
    input_grad_rows_of(x, g, mean, w_rstd, mean_g, slope, dx, share);
}
// bfloat16 only stores: the same double arithmetic (not cloned: no speed claim yet).
void batch_norm_forward_rows(const bfloat16* x, const double* scale, const bfloat16* b, const double* mean, bfloat16* y,
                             const ChannelLayout& share) {
    batch_norm_forward_rows_of(x, scale, b, mean, y, share);
}
void grad_sums(const bfloat16* x, const bfloat16* g, const double* mean, double* sum_g, double* sum_g_xc, const ChannelLayout& share,
               std::size_t c0, std::size_t c1) {
    grad_sums_of(x, g, mean, sum_g, sum_g_xc, share, c0, c1);
}
void input_grad_rows(const bfloat16* x, const bfloat16* g, const double* mean, const double* w_rstd, const double* mean_g,
                     const double* slope, bfloat16* dx, const ChannelLayout& share) {
    input_grad_rows_of(x, g, mean, w_rstd, mean_g, slope, dx, share);
}

}  // namespace

template <class T>
void batch_norm_stats(const T* x, double* mean, double* var, std::size_t N, std::size_t C, std::size_t L) {
    batch_mean_var(x, mean, var, ChannelLayout{N, C, L});
}

template <class T>
void batch_norm_forward(const T* x, const T* w, const T* b, const double* mean, const double* rstd, T* y, std::size_t N,
                        std::size_t C, std::size_t L) {
    const ChannelLayout l{N, C, L};
    std::vector<double> scale(l.channels);
    for (std::size_t c = 0; c < l.channels; ++c) scale[c] = rstd[c] * double(w[c]);
    xg::detail::parallel_for(l.n, l.channels * l.length, [&](std::size_t i0, std::size_t i1) {
        batch_norm_forward_rows(x, scale.data(), b, mean, y, l.rows(i0, i1));
    });
}

// db and dw hold zeros on entry.
template <class T>
void batch_norm_backward(const T* x, const T* g, const T* w, const double* mean, const double* rstd, T* dx, double* dw, double* db,
                         std::size_t N, std::size_t C, std::size_t L, bool training) {
    const ChannelLayout l{N, C, L};
    per_channel_sums(l, db, dw, [&](const ChannelLayout& share, std::size_t c0, std::size_t c1, double* sum_g, double* sum_g_xc) {
        grad_sums(x, g, mean, sum_g, sum_g_xc, share, c0, c1);
    });
    for (std::size_t c = 0; c < C; ++c) dw[c] *= rstd[c];
    if (dx == nullptr) return;
    const double M = static_cast<double>(l.per_channel());
    std::vector<double> mean_g(C, 0.0), mean_g_xhat(C, 0.0);
    for (std::size_t c = 0; c < C; ++c) {
        if (!training) continue;
        mean_g[c] = db[c] / M;
        mean_g_xhat[c] = dw[c] / M;
    }
    batch_norm_input_grad(x, g, w, mean, rstd, mean_g.data(), mean_g_xhat.data(), dx, N, C, L);
}

template <class T>
void batch_norm_input_grad(const T* x, const T* g, const T* w, const double* mean, const double* rstd, const double* mean_g,
                           const double* mean_g_xhat, T* dx, std::size_t N, std::size_t C, std::size_t L) {
    const ChannelLayout l{N, C, L};
    std::vector<double> w_rstd(C), slope(C);
    for (std::size_t c = 0; c < C; ++c) {
        w_rstd[c] = double(w[c]) * rstd[c];
        slope[c] = w_rstd[c] * rstd[c] * mean_g_xhat[c];
    }
    xg::detail::parallel_for(l.n, C * l.length, [&](std::size_t i0, std::size_t i1) {
        input_grad_rows(x, g, mean, w_rstd.data(), mean_g, slope.data(), dx, l.rows(i0, i1));
    });
}

XG_FOR_EACH_STORAGE_TYPE(XG_BATCH_NORM_KERNELS)

}  // namespace xg::nn::fast
