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

// Per array; a block is `bytes / (N * 8 * arrays)` columns wide, a multiple of 8 (a cache line).
std::size_t column_block_bytes() {
    static const std::size_t bytes = [] {
        const char* e = std::getenv("XG_BN_BLOCK_BYTES");
        return e != nullptr ? std::strtoull(e, nullptr, 10) : (std::size_t{1} << 20);
    }();
    return bytes;
}
std::size_t rows_ahead() {
    static const std::size_t rows = [] {
        const char* e = std::getenv("XG_BN_AHEAD");
        return e != nullptr ? std::strtoull(e, nullptr, 10) : std::size_t{32};
    }();
    return rows;
}
constexpr std::size_t kMaxBlockWidth = 256;
// Inputs below this stay in the cache between the passes of the row walk.
constexpr std::size_t kColumnWalkMinBytes = std::size_t{4} << 20;

// The columns [0, C) in blocks [begin(k), end(k)): a head block up to the first column whose address
// in `out` starts a cache line (so that the other blocks' rows stream whole lines), then blocks of
// `width`.
struct ColumnBlocks {
    std::size_t C = 0, head = 0, width = 8;
    std::size_t count() const { return (head > 0 ? 1 : 0) + (C - head + width - 1) / width; }
    std::size_t begin(std::size_t k) const { return head == 0 ? k * width : (k == 0 ? 0 : head + (k - 1) * width); }
    std::size_t end(std::size_t k) const { return std::min(C, head == 0 ? (k + 1) * width : head + k * width); }
};

// The column walk's blocks for `arrays` inputs read twice, or width 0 when the row walk is used.
ColumnBlocks column_blocks(const ChannelLayout& l, const double* out, std::size_t arrays) {
    const std::size_t N = l.n, C = l.channels;
    ColumnBlocks blocks{C, 0, 0};
    if (l.length != 1 || N * C * sizeof(double) < kColumnWalkMinBytes) return blocks;
    const std::size_t width = std::min<std::size_t>(column_block_bytes() / (N * sizeof(double) * arrays) / 8 * 8, kMaxBlockWidth);
    if (width < 8 || C < 2 * width) return blocks;
    blocks.width = width;
    const auto misaligned = reinterpret_cast<std::uintptr_t>(out) % 64;
    if (C % 8 == 0 && misaligned % sizeof(double) == 0) blocks.head = std::min(C, (64 - misaligned) % 64 / sizeof(double));
    return blocks;
}

XG_KERNEL_INLINE void fetch_row_piece(const double* p, std::size_t n) {
    for (std::size_t j = 0; j < n; j += 8) __builtin_prefetch(p + j);
}

// The block's rows sit C apart in x, a multiple of 2 KiB for C a multiple of 256: in a cache indexed by
// address they would all share the few sets of their page offset, and a block of 1 MiB would not stay
// in a 2 MiB L2. So the first pass copies the block into `packed` (n values a row, contiguous), which
// the second pass reads.

// The forward of the columns [c0, c1) for all N rows: the shifted sums as in batch_mean_var (the
// shift from the first `first_rows` rows), rstd = 1/sqrt(var + eps), then y = (x - mean) scale + b
// walking the rows from the last, which the sums left in the cache.
XG_KERNEL_CLONES void forward_column_block(const double* x, const double* w, const double* b, double eps, double* mean,
                                           double* var, double* rstd, double* y, std::size_t N, std::size_t C, std::size_t c0,
                                           std::size_t c1, std::size_t first_rows, const OutputStore& store, double* packed) {
    const std::size_t n = c1 - c0, ahead = rows_ahead();
    double K[kMaxBlockWidth] = {}, sum_d[kMaxBlockWidth] = {}, sum_d2[kMaxBlockWidth] = {};
    for (std::size_t i = 0; i < first_rows; ++i) {
        const double* xi = x + i * C + c0;
#pragma omp simd
        for (std::size_t c = 0; c < n; ++c) K[c] += xi[c];
    }
    for (std::size_t c = 0; c < n; ++c) K[c] /= static_cast<double>(first_rows);
    for (std::size_t i = 0; i < N; ++i) {
        const double* xi = x + i * C + c0;
        double* pi = packed + i * n;
        if (i + ahead < N) fetch_row_piece(xi + ahead * C, n);
#pragma omp simd
        for (std::size_t c = 0; c < n; ++c) {
            const double v = xi[c];
            pi[c] = v;
            const double d = v - K[c];
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
        const double* pi = packed + i * n;
        store(y + i * C + c0, n, [&](std::size_t c) { return (pi[c] - m[c]) * scale[c] + bb[c]; });
    }
}

// The backward of the columns [c0, c1): db = sum g, dw = rstd sum g (x - mean) over the rows, then
// (with dx) dx = w_rstd (g - mean(g)) - slope (x - mean) as in input_grad_rows, rows from the last.
XG_KERNEL_CLONES void backward_column_block(const double* x, const double* g, const double* w, const double* mean,
                                            const double* rstd, double* dx, double* dw, double* db, std::size_t N, std::size_t C,
                                            std::size_t c0, std::size_t c1, bool training, const OutputStore& store,
                                            double* packed) {
    const std::size_t n = c1 - c0, ahead = rows_ahead();
    double sum_g[kMaxBlockWidth] = {}, sum_g_xc[kMaxBlockWidth] = {};
    const double* mc = mean + c0;
    for (std::size_t i = 0; i < N; ++i) {
        const double *xi = x + i * C + c0, *gi = g + i * C + c0;
        double* pi = packed + 2 * i * n;
        if (i + ahead < N) {
            fetch_row_piece(xi + ahead * C, n);
            fetch_row_piece(gi + ahead * C, n);
        }
#pragma omp simd
        for (std::size_t c = 0; c < n; ++c) {
            const double xv = xi[c], gv = gi[c];
            pi[c] = xv;
            pi[n + c] = gv;
            sum_g[c] += gv;
            sum_g_xc[c] += gv * (xv - mc[c]);
        }
    }
    for (std::size_t c = 0; c < n; ++c) {
        db[c0 + c] += sum_g[c];
        dw[c0 + c] += sum_g_xc[c];
        dw[c0 + c] *= rstd[c0 + c];
    }
    if (dx == nullptr) return;
    const double M = static_cast<double>(N);
    double w_rstd[kMaxBlockWidth], mean_g[kMaxBlockWidth], slope[kMaxBlockWidth];
    for (std::size_t c = 0; c < n; ++c) {
        w_rstd[c] = w[c0 + c] * rstd[c0 + c];
        mean_g[c] = training ? db[c0 + c] / M : 0.0;
        slope[c] = w_rstd[c] * rstd[c0 + c] * (training ? dw[c0 + c] / M : 0.0);
    }
    for (std::size_t i = N; i-- > 0;) {
        const double *xi = packed + 2 * i * n, *gi = xi + n;
        store(dx + i * C + c0, n, [&](std::size_t c) { return w_rstd[c] * (gi[c] - mean_g[c]) - slope[c] * (xi[c] - mc[c]); });
    }
}

// body(c0, c1, packed) for every block, each thread with its own `packed` of `packed_size` doubles,
// kept between calls (the blocks' working memory, in this thread's L2).
template <class Body>
void for_column_blocks(const ColumnBlocks& blocks, std::size_t N, std::size_t packed_size, Body&& body) {
    xg::detail::parallel_for(blocks.count(), N * blocks.width, [&](std::size_t k0, std::size_t k1) {
        thread_local std::vector<double> packed;
        if (packed.size() < packed_size) packed.resize(packed_size);
        for (std::size_t k = k0; k < k1; ++k) body(blocks.begin(k), blocks.end(k), packed.data());
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
    const ColumnBlocks blocks = column_blocks(l, y, 1);
    if (blocks.width == 0) {
        batch_mean_var(x, mean, var, l);
        for (std::size_t c = 0; c < C; ++c) rstd[c] = 1.0 / std::sqrt(var[c] + eps);
        batch_norm_forward(x, w, b, mean, rstd, y, N, C, L);
        return;
    }
    const std::size_t first_rows = std::clamp<std::size_t>(kFirstBlockBytes / (sizeof(double) * C), 1, N);
    const OutputStore store(y, N * C, C);
    for_column_blocks(blocks, N, N * std::max(blocks.width, blocks.head), [&](std::size_t c0, std::size_t c1, double* packed) {
        forward_column_block(x, w, b, eps, mean, var, rstd, y, N, C, c0, c1, first_rows, store, packed);
    });
}

// db and dw hold zeros on entry.
void batch_norm_backward(const double* x, const double* g, const double* w, const double* mean, const double* rstd, double* dx,
                         double* dw, double* db, std::size_t N, std::size_t C, std::size_t L, bool training) {
    const ChannelLayout l{N, C, L};
    const ColumnBlocks blocks = column_blocks(l, dx != nullptr ? dx : x, 2);
    if (blocks.width != 0) {
        const OutputStore store(dx, N * C, C);
        for_column_blocks(blocks, N, 2 * N * std::max(blocks.width, blocks.head), [&](std::size_t c0, std::size_t c1, double* packed) {
            backward_column_block(x, g, w, mean, rstd, dx, dw, db, N, C, c0, c1, training, store, packed);
        });
        return;
    }
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
