// BatchNorm's fast kernels: the per-channel loops of nn/reference/batch_norm.cpp rewritten for
// memory order with the primitives of nn/fast/kernel_primitives.hpp (channel_sums, channel_map:
// vectorised across channels or along L), a one-pass shifted variance, and thread splits that give
// the same bits at any thread count.
#include "nn/fast/batch_norm.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "core/fast/parallel.hpp"
#include "nn/fast/kernel_primitives.hpp"

namespace xg::nn::fast {

namespace {

using detail::channel_map;
using detail::channel_sums;
using detail::ChannelLayout;
using detail::OutputStore;

// Per channel, in one pass over x: d = x - K from a shift K = the channel's mean over the first
// rows (~256 KiB, still in cache), so that sum(d^2) keeps its digits (docs/derivations/batchnorm.md);
// mean = K + sum(d)/M, var = (sum(d^2) - sum(d)^2/M)/M (biased).
constexpr std::size_t kFirstBlockBytes = std::size_t{256} << 10;
XG_KERNEL_CLONES void channel_shift(const double* x, double* K, const ChannelLayout& first) {
    std::vector<double> unused(first.channels, 0.0);
    channel_sums<8>(first, K, unused.data(), [x](std::size_t, std::size_t k) { return std::pair{x[k], 0.0}; });
    for (std::size_t c = 0; c < first.channels; ++c) K[c] /= static_cast<double>(first.per_channel());
}
// sum(d) and sum(d^2) over the rows of a share (with L > 1: of the channels [c0, c1))
XG_KERNEL_CLONES void centered_sums(const double* x, const double* K, double* sum_d, double* sum_d2, const ChannelLayout& share,
                                    std::size_t c0, std::size_t c1) {
    channel_sums<8>(share, sum_d, sum_d2, [x, K](std::size_t c, std::size_t k) {
        const double d = x[k] - K[c];
        return std::pair{d, d * d};
    }, c0, c1);
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
void batch_mean_var(const double* x, double* mean, double* var, const ChannelLayout& l) {
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
XG_KERNEL_CLONES void batch_norm_forward_rows(const double* x, const double* scale, const double* b, const double* mean,
                                              double* y, const ChannelLayout& share) {
    channel_map(share, y, [=](std::size_t c, std::size_t k) { return (x[k] - mean[c]) * scale[c] + b[c]; });
}

// With g = dL/dy, per channel c: db_c = sum g, dw_c = sum g xhat (pass 1) and (pass 2)
//   training: dx = w_c rstd_c (g - mean(g) - xhat mean(g xhat))
//   eval:     dx = w_c rstd_c g   (the statistics are constants: mean(g), mean(g xhat) drop out)
// sum g xhat = rstd_c sum g (x - mean_c): one rounding of rstd per channel, not per term.
XG_KERNEL_CLONES void grad_sums(const double* x, const double* g, const double* mean, double* sum_g, double* sum_g_xc,
                                const ChannelLayout& share, std::size_t c0, std::size_t c1) {
    channel_sums<4>(share, sum_g, sum_g_xc, [=](std::size_t c, std::size_t k) { return std::pair{g[k], g[k] * (x[k] - mean[c])}; },
                    c0, c1);
}
// With xhat = (x - mean) rstd the training formula is dx = w_rstd (g - mean(g)) - slope (x - mean)
// for w_rstd = w rstd, slope = w_rstd rstd mean(g xhat): four per-channel vectors instead of five.
XG_KERNEL_CLONES void input_grad_rows(const double* x, const double* g, const double* mean, const double* w_rstd,
                                      const double* mean_g, const double* slope, double* dx, const ChannelLayout& share) {
    channel_map(share, dx, [=](std::size_t c, std::size_t k) { return w_rstd[c] * (g[k] - mean_g[c]) - slope[c] * (x[k] - mean[c]); });
}

// ---- (N, C) inputs in column blocks ------------------------------------------------------------
// The statistics span the batch, so a row walk reads x twice forward (sums, then y) and x and dy
// twice backward (sums, then dx): 8 passes over memory. A block of columns for all rows that fits
// in this core's L2 is read once from memory for its sums and again, for y or dx, from the cache:
// 5 passes. Each column's sums run over the rows in order inside one thread's block, so the bits do
// not depend on the thread count nor on the block width. Block widths: docs/performance.md.

// A block holds at most this many bytes of x (measured: docs/performance.md) ...
std::size_t column_block_bytes() {
    static const std::size_t bytes = [] {
        const char* e = std::getenv("XG_BN_BLOCK_BYTES");
        return e != nullptr ? std::strtoull(e, nullptr, 10) : (std::size_t{8} << 20);
    }();
    return bytes;
}
std::size_t min_block_width() {
    static const std::size_t w = [] {
        const char* e = std::getenv("XG_BN_MIN_WIDTH");
        return e != nullptr ? std::strtoull(e, nullptr, 10) : std::size_t{128};
    }();
    return w;
}
constexpr std::size_t kRowsAhead = 32;
constexpr std::size_t kMaxBlockWidth = 512;
// Inputs below this stay in the cache between the passes of the row walk.
constexpr std::size_t kColumnWalkMinBytes = std::size_t{4} << 20;

// The columns [0, C) in `count` blocks, split at head + k width (k = 1 .. count - 1): head is the
// first column whose address in the output starts a cache line, so that the rows of every block
// but the first start on a line and stream whole lines.
struct ColumnBlocks {
    std::size_t C = 0, head = 0, width = 0, count = 0;
    std::size_t begin(std::size_t k) const { return k == 0 ? 0 : head + k * width; }
    std::size_t end(std::size_t k) const { return k + 1 == count ? C : head + (k + 1) * width; }
};

// The forward's column blocks, or width 0 when the row walk is used: as many blocks as x has
// column_block_bytes() (at least two), a multiple of the threads so that each gets the same share.
// The width changes no bit (each column's sums run over the rows in order whatever the block).
ColumnBlocks column_blocks(const ChannelLayout& l, const double* out) {
    const std::size_t N = l.n, C = l.channels, bytes = N * C * sizeof(double);
    ColumnBlocks blocks;
    if (l.length != 1 || bytes < kColumnWalkMinBytes) return blocks;
    const auto threads = static_cast<std::size_t>(xg::detail::threads_for(C, N));
    std::size_t count = std::max<std::size_t>((bytes + column_block_bytes() - 1) / column_block_bytes(), 2);
    count = (count + threads - 1) / threads * threads;
    const std::size_t width = C / count / 8 * 8;
    if (width < min_block_width()) return blocks;
    const auto misaligned = reinterpret_cast<std::uintptr_t>(out) % 64;
    const std::size_t head = C % 8 == 0 && misaligned % sizeof(double) == 0 ? (64 - misaligned) % 64 / sizeof(double) : 0;
    const ColumnBlocks candidate{C, head, width, count};
    for (std::size_t k = 0; k < count; ++k) {
        if (candidate.end(k) - candidate.begin(k) > kMaxBlockWidth) return blocks;
    }
    blocks = candidate;
    return blocks;
}

XG_KERNEL_INLINE void fetch_row_piece(const double* p, std::size_t n) {
    for (std::size_t j = 0; j < n; j += 8) __builtin_prefetch(p + j);
}

// The forward of the columns [c0, c1) for all N rows: the shifted sums as in batch_mean_var (the
// shift from the first `first_rows` rows), rstd = 1/sqrt(var + eps), then y = (x - mean) scale + b
// walking the rows from the last, which the sums left in the cache.
XG_KERNEL_CLONES void forward_column_block(const double* x, const double* w, const double* b, double eps, double* mean,
                                           double* var, double* rstd, double* y, std::size_t N, std::size_t C, std::size_t c0,
                                           std::size_t c1, std::size_t first_rows, const OutputStore& store) {
    const std::size_t n = c1 - c0, ahead = kRowsAhead;
    double K[kMaxBlockWidth] = {}, sum_d[kMaxBlockWidth] = {}, sum_d2[kMaxBlockWidth] = {};
    for (std::size_t i = 0; i < first_rows; ++i) {
        const double* xi = x + i * C + c0;
#pragma omp simd
        for (std::size_t c = 0; c < n; ++c) K[c] += xi[c];
    }
    for (std::size_t c = 0; c < n; ++c) K[c] /= static_cast<double>(first_rows);
    for (std::size_t i = 0; i < N; ++i) {
        const double* xi = x + i * C + c0;
        if (i + ahead < N) fetch_row_piece(xi + ahead * C, n);
#pragma omp simd
        for (std::size_t c = 0; c < n; ++c) {
            const double d = xi[c] - K[c];
            sum_d[c] += d;
            sum_d2[c] += d * d;
        }
    }
    const double M = static_cast<double>(N);
    double scale[kMaxBlockWidth], m[kMaxBlockWidth];
    for (std::size_t c = 0; c < n; ++c) {
        m[c] = mean[c0 + c] = K[c] + sum_d[c] / M;
        var[c0 + c] = std::max(0.0, (sum_d2[c] - sum_d[c] * sum_d[c] / M) / M);
        rstd[c0 + c] = 1.0 / std::sqrt(var[c0 + c] + eps);
        scale[c] = rstd[c0 + c] * w[c0 + c];
    }
    const double* bb = b + c0;
    for (std::size_t i = N; i-- > 0;) {
        const double* xi = x + i * C + c0;
        store(y + i * C + c0, n, [&](std::size_t c) { return (xi[c] - m[c]) * scale[c] + bb[c]; });
    }
}

template <class Body>
void for_column_blocks(const ColumnBlocks& blocks, std::size_t N, Body&& body) {
    xg::detail::parallel_for(blocks.count, N * blocks.width, [&](std::size_t k0, std::size_t k1) {
        for (std::size_t k = k0; k < k1; ++k) body(blocks.begin(k), blocks.end(k));
    });
}

}  // namespace

void batch_norm_stats(const double* x, double* mean, double* var, std::size_t N, std::size_t C, std::size_t L) {
    batch_mean_var(x, mean, var, ChannelLayout{N, C, L});
}

void batch_norm_forward(const double* x, const double* w, const double* b, const double* mean, const double* rstd, double* y,
                        std::size_t N, std::size_t C, std::size_t L) {
    const ChannelLayout l{N, C, L};
    std::vector<double> scale(l.channels);
    for (std::size_t c = 0; c < l.channels; ++c) scale[c] = rstd[c] * w[c];
    xg::detail::parallel_for(l.n, l.channels * l.length, [&](std::size_t i0, std::size_t i1) {
        batch_norm_forward_rows(x, scale.data(), b, mean, y, l.rows(i0, i1));
    });
}

void batch_norm_train_forward(const double* x, const double* w, const double* b, double eps, double* mean, double* var,
                              double* rstd, double* y, std::size_t N, std::size_t C, std::size_t L) {
    const ChannelLayout l{N, C, L};
    const ColumnBlocks blocks = column_blocks(l, y);
    if (blocks.width == 0) {
        batch_mean_var(x, mean, var, l);
        for (std::size_t c = 0; c < C; ++c) rstd[c] = 1.0 / std::sqrt(var[c] + eps);
        batch_norm_forward(x, w, b, mean, rstd, y, N, C, L);
        return;
    }
    const std::size_t first_rows = std::clamp<std::size_t>(kFirstBlockBytes / (sizeof(double) * C), 1, N);
    const OutputStore store(y, N * C, C);
    for_column_blocks(blocks, N, [&](std::size_t c0, std::size_t c1) {
        forward_column_block(x, w, b, eps, mean, var, rstd, y, N, C, c0, c1, first_rows, store);
    });
}

// db and dw hold zeros on entry.
void batch_norm_backward(const double* x, const double* g, const double* w, const double* mean, const double* rstd, double* dx,
                         double* dw, double* db, std::size_t N, std::size_t C, std::size_t L, bool training) {
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

void batch_norm_input_grad(const double* x, const double* g, const double* w, const double* mean, const double* rstd,
                           const double* mean_g, const double* mean_g_xhat, double* dx, std::size_t N, std::size_t C,
                           std::size_t L) {
    const ChannelLayout l{N, C, L};
    std::vector<double> w_rstd(C), slope(C);
    for (std::size_t c = 0; c < C; ++c) {
        w_rstd[c] = w[c] * rstd[c];
        slope[c] = w_rstd[c] * rstd[c] * mean_g_xhat[c];
    }
    xg::detail::parallel_for(l.n, C * l.length, [&](std::size_t i0, std::size_t i1) {
        input_grad_rows(x, g, mean, w_rstd.data(), mean_g, slope.data(), dx, l.rows(i0, i1));
    });
}

}  // namespace xg::nn::fast
