// BatchNorm over (N, C) or (N, C, L) as one graph node; (N, C, H, W) and any (N, C, *) are
// (N, C, L) with L the product of the trailing axes. Channel c's M = N*L values sit in N
// contiguous segments of length L (x[(n*C + c)*L + l]). Every loop walks memory in order: 2-D
// input (L = 1) row by row, vectorised across the C channels of a row; 3-D input segment by
// segment, vectorised along L. The statistics take one pass over memory (see batch_stats).
// Derivation of the backward (through the batch statistics): docs/derivations/batchnorm.md.
#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "nn/functional.hpp"
#include "nn/row_kernels.hpp"

namespace xg::nn::functional {

namespace {

struct BatchLayout {
    std::size_t n = 0, channels = 0, length = 1;  // (N, C, L), L = 1 for 2-D input
    std::size_t per_channel() const { return n * length; }
};

void check_channel_vector(const char* op, const char* what, const Tensor& t, const Shape& sx) {
    if (t.defined() && t.shape() != Shape{sx[1]}) {
        fail(op, fmt::format("{} has shape {} but input {} has {} channels (expected ({},))", what, shape_str(t.shape()),
                             shape_str(sx), sx[1], sx[1]));
    }
}

BatchLayout check_batch_norm(const char* op, const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                             const Tensor& weight, const Tensor& bias, bool training) {
    if (!x.defined()) fail(op, "input must be a defined tensor");
    const Shape sx = x.shape();
    if (sx.size() < 2) fail(op, fmt::format("expects an input (N, C, *), e.g. (N, C) or (N, C, H, W), got {}", shape_str(sx)));
    check_channel_vector(op, "weight", weight, sx);
    check_channel_vector(op, "bias", bias, sx);
    check_channel_vector(op, "running_mean", running_mean, sx);
    check_channel_vector(op, "running_var", running_var, sx);
    BatchLayout l{sx[0], sx[1], 1};
    for (std::size_t a = 2; a < sx.size(); ++a) l.length *= sx[a];  // (N, C, H, W) is (N, C, L = H W)
    if (training && l.per_channel() <= 1) {
        fail(op, fmt::format("Expected more than 1 value per channel when training, got input of shape {}", shape_str(sx)));
    }
    if (!training && (!running_mean.defined() || !running_var.defined())) {
        fail(op, fmt::format("evaluation mode needs running_mean and running_var (input {})", shape_str(sx)));
    }
    return l;
}

Array to_array(const std::vector<double>& v) {
    Array a = Array::from_shape({v.size()});
    std::copy(v.begin(), v.end(), a.begin());
    return a;
}

Array flat(Array a) {
    a.reshape({a.size()});
    return a;
}

// Samples [begin, end) along N.
struct Rows {
    std::size_t begin, end;
};

// Calls f(channel, offset of a segment of `length` values) for every (n, c) of the rows, in memory order.
template <class F>
XG_KERNEL_INLINE void for_each_segment(const BatchLayout& l, Rows r, F&& f) {
    for (std::size_t i = r.begin; i < r.end; ++i) {
        for (std::size_t c = 0; c < l.channels; ++c) f(c, (i * l.channels + c) * l.length);
    }
}

// sum_a[c] and sum_b[c] accumulate the two values term(c, k, a, b) adds for every element k of
// channel c. With L = 1 a segment is one element, so the loop runs across a row's channels
// instead (one segment call per element was 2.4x slower than libtorch at (4096, 768)),
// `kRowsAtOnce` rows at a time: the per-channel sums live in memory, and updating them once per
// element made the loop bound by those loads and stores rather than by reading x. Callers pick
// kRowsAtOnce so that about eight rows stream in at once: 8 for a sum over x alone, 4 over x
// and dy (more streams than that ran slower: 16 rows of x, 8 of x and dy).
template <std::size_t kRowsAtOnce, class Term>
XG_KERNEL_INLINE void channel_sums(const BatchLayout& l, Rows r, double* sum_a, double* sum_b, Term&& term) {
    const std::size_t C = l.channels, L = l.length;
    if (L == 1) {
        std::size_t i = r.begin;
        for (; i + kRowsAtOnce <= r.end; i += kRowsAtOnce) {
            const std::size_t row = i * C;
#pragma omp simd
            for (std::size_t c = 0; c < C; ++c) {
                double a = 0.0, b = 0.0;
                for (std::size_t q = 0; q < kRowsAtOnce; ++q) term(c, row + q * C + c, a, b);
                sum_a[c] += a;
                sum_b[c] += b;
            }
        }
        for (; i < r.end; ++i) {
            const std::size_t row = i * C;
#pragma omp simd
            for (std::size_t c = 0; c < C; ++c) term(c, row + c, sum_a[c], sum_b[c]);
        }
        return;
    }
    for_each_segment(l, r, [&](std::size_t c, std::size_t off) {
        double a = 0.0, s = 0.0;
        detail::row_sums(L, a, s, [&](std::size_t j, double& pa, double& ps) { term(c, off + j, pa, ps); });
        sum_a[c] += a;
        sum_b[c] += s;
    });
}

// out[k] = f(c, k) for every element k (of channel c), in memory order, through
// detail::store_rows (streaming stores for a large output). With L = 1, four rows per pass over
// the channels, so that f's per-channel constants are loaded once for the four: with C of them
// per array they otherwise compete with the rows for L1 (dx at (4096, 768) 4.9 -> 3.6 ms in a
// standalone test; two rows 4.4, eight 4.7).
template <class F>
XG_KERNEL_INLINE void channel_map(const BatchLayout& l, double* out, F&& f) {
    const std::size_t C = l.channels, L = l.length;
    const bool stream = detail::streams(out, l.n * C * L, L == 1 ? C : L);
    if (L == 1) {
        std::size_t i = 0;
        for (; i + 4 <= l.n; i += 4) {
            const std::size_t row = i * C;
            detail::store_rows<4>(out + row, C, C, stream, [&](std::size_t q, std::size_t c) { return f(c, row + q * C + c); });
        }
        for (; i < l.n; ++i) {
            const std::size_t row = i * C;
            detail::store_rows<1>(out + row, C, C, stream, [&](std::size_t, std::size_t c) { return f(c, row + c); });
        }
    } else {
        for_each_segment(l, Rows{0, l.n}, [&](std::size_t c, std::size_t off) {
            detail::store_rows<1>(out + off, L, L, stream, [&](std::size_t, std::size_t j) { return f(c, off + j); });
        });
    }
    if (stream) detail::store_fence();
}

struct ChannelStats {
    Array mean, rstd;     // used to normalise (batch or running statistics)
    Array batch_var;      // biased batch variance (training only)
};

// Statistics in one pass over memory: d = x - K with K per channel the exact mean of the first
// rows (corrected two-pass over a block that stays in cache), then mean = K + sum(d)/M and
// var = (sum(d^2) - sum(d)^2/M)/M over all rows - layer_norm's corrected two-pass with the
// first rows standing in for the first pass. Constant channels stay exact (d = 0). Because
// the first rows are 1/B of the data, (mean - K)^2 <= (B - 1) var: at most log10(B) digits of
// var can cancel, none when the first block is everything (small inputs).
constexpr std::size_t kFirstBlockBytes = std::size_t{256} << 10;
XG_KERNEL_CLONES ChannelStats batch_stats(const double* x, const BatchLayout& l, double eps) {
    const std::size_t C = l.channels;
    const std::size_t first = std::clamp<std::size_t>(kFirstBlockBytes / (sizeof(double) * C * l.length), 1, l.n);
    const double first_count = static_cast<double>(first * l.length), count = static_cast<double>(l.per_channel());
    std::vector<double> k(C, 0.0), unused(C, 0.0), sd(C, 0.0), sd2(C, 0.0);
    channel_sums<8>(l, Rows{0, first}, k.data(), unused.data(), [x](std::size_t, std::size_t i, double& a, double&) { a += x[i]; });
    for (std::size_t c = 0; c < C; ++c) k[c] /= first_count;
    const auto deviations = [x, m = k.data()](std::size_t c, std::size_t i, double& a, double& d2) {
        const double d = x[i] - m[c];
        a += d;
        d2 += d * d;
    };
    if (first < l.n) {
        channel_sums<8>(l, Rows{0, first}, sd.data(), sd2.data(), deviations);
        for (std::size_t c = 0; c < C; ++c) {
            k[c] += sd[c] / first_count;
            sd[c] = sd2[c] = 0.0;
        }
    }
    channel_sums<8>(l, Rows{0, l.n}, sd.data(), sd2.data(), deviations);
    ChannelStats s{Array::from_shape({C}), Array::from_shape({C}), Array::from_shape({C})};
    for (std::size_t c = 0; c < C; ++c) {
        s.batch_var(c) = std::max(0.0, (sd2[c] - sd[c] * sd[c] / count) / count);
        s.mean(c) = k[c] + sd[c] / count;
        s.rstd(c) = 1.0 / std::sqrt(s.batch_var(c) + eps);
    }
    return s;
}

ChannelStats running_stats(const Tensor& running_mean, const Tensor& running_var, double eps) {
    ChannelStats s{running_mean.value(), Array::from_shape(running_var.value().shape()), Array()};
    for (std::size_t c = 0; c < s.rstd.size(); ++c) s.rstd(c) = 1.0 / std::sqrt(running_var.value()(c) + eps);
    return s;
}

// running = (1 - momentum) running + momentum batch_stat, with the unbiased variance for running_var.
void update_running(Tensor& running_mean, Tensor& running_var, const Array& mean, const Array& biased_var,
                    const BatchLayout& l, double momentum) {
    const double count = static_cast<double>(l.per_channel());
    const double unbias = count / (count - 1.0);
    for (std::size_t c = 0; c < l.channels; ++c) {
        if (running_mean.defined()) {
            double& r = running_mean.mutable_value()(c);
            r = (1.0 - momentum) * r + momentum * mean(c);
        }
        if (running_var.defined()) {
            double& r = running_var.mutable_value()(c);
            r = (1.0 - momentum) * r + momentum * biased_var(c) * unbias;
        }
    }
}

// y = (x - mean) * scale + shift per channel.
XG_KERNEL_CLONES void batch_norm_output(const double* x, const double* mean, const double* scale, const double* shift,
                                        double* y, const BatchLayout& l) {
    channel_map(l, y, [=](std::size_t c, std::size_t k) { return (x[k] - mean[c]) * scale[c] + shift[c]; });
}

// sum_g[c] = sum dy, sum_g_centered[c] = sum dy (x - mean) over channel c (times rstd: sum dy xhat).
XG_KERNEL_CLONES void batch_norm_grad_sums(const double* x, const double* g, const double* mean, double* sum_g,
                                           double* sum_g_centered, const BatchLayout& l) {
    channel_sums<4>(l, Rows{0, l.n}, sum_g, sum_g_centered, [=](std::size_t c, std::size_t k, double& a, double& s) {
        a += g[k];
        s += g[k] * (x[k] - mean[c]);
    });
}

// dx = a (dy - mg) - b (x - mean) per channel, the backward's formula with its per-channel
// factors folded into a = w rstd, mg = mean(dy), b = a rstd mean(dy xhat).
XG_KERNEL_CLONES void batch_norm_input_grad(const double* x, const double* g, const double* mean, const double* a,
                                            const double* mg, const double* b, double* dx, const BatchLayout& l) {
    channel_map(l, dx, [=](std::size_t c, std::size_t k) { return a[c] * (g[k] - mg[c]) - b[c] * (x[k] - mean[c]); });
}

}  // namespace

Tensor batch_norm(const Tensor& x, Tensor running_mean, Tensor running_var, const Tensor& weight, const Tensor& bias,
                  bool training, double momentum, double eps) {
    const BatchLayout l = check_batch_norm("batch_norm", x, running_mean, running_var, weight, bias, training);
    ChannelStats s = training ? batch_stats(x.data(), l, eps) : running_stats(running_mean, running_var, eps);
    if (training) update_running(running_mean, running_var, s.mean, s.batch_var, l, momentum);

    const std::size_t C = l.channels;
    std::vector<double> scale(C), shift(C);  // y = (x - mean) * rstd * w + b = (x - mean) * scale + shift
    for (std::size_t c = 0; c < C; ++c) {
        scale[c] = s.rstd(c) * (weight.defined() ? weight.value()(c) : 1.0);
        shift[c] = bias.defined() ? bias.value()(c) : 0.0;
    }
    Array y = empty_like(x.value());
    batch_norm_output(x.data(), s.mean.data(), scale.data(), shift.data(), y.data(), l);

    std::vector<Tensor> inputs{x};
    const int wi = weight.defined() ? static_cast<int>(inputs.size()) : -1;
    if (weight.defined()) inputs.push_back(weight);
    const int bi = bias.defined() ? static_cast<int>(inputs.size()) : -1;
    if (bias.defined()) inputs.push_back(bias);
    std::vector<SavedInfo> saved{{"mean", {C}}, {"rstd", {C}}};
    // training: dx = w rstd (dy - mean(dy) - xhat mean(dy xhat)); eval: dx = w rstd dy;
    // dw = sum dy xhat, db = sum dy (sums over N and L)
    return record(
        "batch_norm", std::move(y), std::move(inputs),
        [l, wi, bi, training, mean = std::move(s.mean), rstd = std::move(s.rstd)](const GradContext& c) -> Grads {
            const std::size_t C = l.channels;
            std::vector<double> sum_g(C, 0.0), sum_g_xhat(C, 0.0);
            batch_norm_grad_sums(c.input(0).data(), c.grad.data(), mean.data(), sum_g.data(), sum_g_xhat.data(), l);
            for (std::size_t ch = 0; ch < C; ++ch) sum_g_xhat[ch] *= rstd(ch);
            Grads g(c.num_inputs());
            if (c.needs_grad(0)) {
                // In eval mode the statistics are constants: mg = b = 0 leaves dx = w rstd dy.
                const double inv_count = 1.0 / static_cast<double>(l.per_channel());
                std::vector<double> a(C), mg(C), b(C);
                for (std::size_t ch = 0; ch < C; ++ch) {
                    a[ch] = rstd(ch) * (wi >= 0 ? c.input(static_cast<std::size_t>(wi))(ch) : 1.0);
                    mg[ch] = training ? sum_g[ch] * inv_count : 0.0;
                    b[ch] = training ? a[ch] * rstd(ch) * (sum_g_xhat[ch] * inv_count) : 0.0;
                }
                Array dx = empty_like(c.input(0));
                batch_norm_input_grad(c.input(0).data(), c.grad.data(), mean.data(), a.data(), mg.data(), b.data(), dx.data(), l);
                g[0] = std::move(dx);
            }
            if (wi >= 0 && c.needs_grad(static_cast<std::size_t>(wi))) g[static_cast<std::size_t>(wi)] = to_array(sum_g_xhat);
            if (bi >= 0 && c.needs_grad(static_cast<std::size_t>(bi))) g[static_cast<std::size_t>(bi)] = to_array(sum_g);
            return g;
        },
        std::move(saved));
}

Tensor batch_norm_composed(const Tensor& x, Tensor running_mean, Tensor running_var, const Tensor& weight,
                           const Tensor& bias, bool training, double momentum, double eps) {
    const BatchLayout l = check_batch_norm("batch_norm_composed", x, running_mean, running_var, weight, bias, training);
    Axes axes{0};  // every axis but the channels
    std::vector<long> channel_shape{static_cast<long>(l.channels)};  // (C, 1, ..., 1) broadcasts over the rest
    for (std::size_t a = 2; a < x.dim(); ++a) {
        axes.push_back(static_cast<int>(a));
        channel_shape.push_back(1);
    }
    Tensor y;
    if (training) {
        const Tensor mu = mean(x, axes, true);
        const Tensor variance = var(x, axes, false, true);
        y = (x - mu) / sqrt(variance + eps);
        update_running(running_mean, running_var, flat(mu.value()), flat(variance.value()), l, momentum);
    } else {
        const Tensor mu = reshape(running_mean.detach(), channel_shape);
        const Tensor variance = reshape(running_var.detach(), channel_shape);
        y = (x - mu) / sqrt(variance + eps);
    }
    if (weight.defined()) y = y * reshape(weight, channel_shape);
    if (bias.defined()) y = y + reshape(bias, channel_shape);
    return y;
}

}  // namespace xg::nn::functional
