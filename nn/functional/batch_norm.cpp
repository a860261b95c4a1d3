// BatchNorm over (N, C) or (N, C, L) as one graph node; (N, C, H, W) and any (N, C, *) are
// (N, C, L) with L the product of the trailing axes. The kernels follow
// docs/derivations/batchnorm.md with its symbols; the per-channel loops they are written with
// (channel_sums, channel_map: memory order, vectorised across channels or along L) are in
// nn/fast/kernel_primitives.hpp.
#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "core/engine/composed_backward.hpp"
#include "core/fast/parallel.hpp"
#include "nn/functional/functional.hpp"
#include "nn/fast/kernel_primitives.hpp"

namespace xg::nn::functional {

namespace {

using detail::channel_map;
using detail::channel_sums;
using detail::ChannelLayout;

void check_channel_vector(const char* op, const char* what, const Tensor& t, const Shape& sx) {
    if (t.defined() && t.shape() != Shape{sx[1]}) {
        fail(op, fmt::format("{} has shape {} but input {} has {} channels (expected ({},))", what, shape_str(t.shape()),
                             shape_str(sx), sx[1], sx[1]));
    }
}

ChannelLayout check_batch_norm(const char* op, const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                               const Tensor& weight, const Tensor& bias, bool training) {
    if (!x.defined()) fail(op, "input must be a defined tensor");
    const Shape sx = x.shape();
    if (sx.size() < 2) fail(op, fmt::format("expects an input (N, C, *), e.g. (N, C) or (N, C, H, W), got {}", shape_str(sx)));
    check_channel_vector(op, "weight", weight, sx);
    check_channel_vector(op, "bias", bias, sx);
    check_channel_vector(op, "running_mean", running_mean, sx);
    check_channel_vector(op, "running_var", running_var, sx);
    ChannelLayout l{sx[0], sx[1], 1};
    for (std::size_t a = 2; a < sx.size(); ++a) l.length *= sx[a];  // (N, C, H, W) is (N, C, L = H W)
    if (training && l.per_channel() <= 1) {
        fail(op, fmt::format("Expected more than 1 value per channel when training, got input of shape {}", shape_str(sx)));
    }
    if (!training && (!running_mean.defined() || !running_var.defined())) {
        fail(op, fmt::format("evaluation mode needs running_mean and running_var (input {})", shape_str(sx)));
    }
    return l;
}

Array flat(Array a) {
    a.reshape({a.size()});
    return a;
}

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
void batch_norm_forward(const double* x, const double* w, const double* b, const double* mean, const double* rstd, double* y,
                        const ChannelLayout& l) {
    std::vector<double> scale(l.channels);
    for (std::size_t c = 0; c < l.channels; ++c) scale[c] = rstd[c] * w[c];
    xg::detail::parallel_for(l.n, l.channels * l.length, [&](std::size_t i0, std::size_t i1) {
        batch_norm_forward_rows(x, scale.data(), b, mean, y, l.rows(i0, i1));
    });
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
// db and dw hold zeros on entry.
void batch_norm_backward(const double* x, const double* g, const double* w, const double* mean, const double* rstd, double* dx,
                         double* dw, double* db, const ChannelLayout& l, bool training) {
    const std::size_t C = l.channels;
    per_channel_sums(l, db, dw, [&](const ChannelLayout& share, std::size_t c0, std::size_t c1, double* sum_g, double* sum_g_xc) {
        grad_sums(x, g, mean, sum_g, sum_g_xc, share, c0, c1);
    });
    for (std::size_t c = 0; c < C; ++c) dw[c] *= rstd[c];
    if (dx == nullptr) return;
    const double M = static_cast<double>(l.per_channel());
    std::vector<double> w_rstd(C), mean_g(C, 0.0), slope(C, 0.0);
    for (std::size_t c = 0; c < C; ++c) {
        w_rstd[c] = w[c] * rstd[c];
        if (!training) continue;
        mean_g[c] = db[c] / M;
        slope[c] = w_rstd[c] * rstd[c] * (dw[c] / M);
    }
    xg::detail::parallel_for(l.n, C * l.length, [&](std::size_t i0, std::size_t i1) {
        input_grad_rows(x, g, mean, w_rstd.data(), mean_g.data(), slope.data(), dx, l.rows(i0, i1));
    });
}

struct ChannelStats {
    Array mean, rstd;  // used to normalise (batch or running statistics)
    Array batch_var;   // biased batch variance (training only)
};

ChannelStats batch_stats(const Tensor& x, const ChannelLayout& l, double eps) {
    ChannelStats s{Array::from_shape({l.channels}), Array::from_shape({l.channels}), Array::from_shape({l.channels})};
    batch_mean_var(x.data(), s.mean.data(), s.batch_var.data(), l);
    for (std::size_t c = 0; c < l.channels; ++c) s.rstd(c) = 1.0 / std::sqrt(s.batch_var(c) + eps);
    return s;
}

ChannelStats running_stats(const Tensor& running_mean, const Tensor& running_var, double eps) {
    ChannelStats s{running_mean.value(), Array::from_shape(running_var.value().shape()), Array()};
    for (std::size_t c = 0; c < s.rstd.size(); ++c) s.rstd(c) = 1.0 / std::sqrt(running_var.value()(c) + eps);
    return s;
}

// running = (1 - momentum) running + momentum batch_stat, with the unbiased variance for running_var.
void update_running(Tensor& running_mean, Tensor& running_var, const Array& mean, const Array& biased_var,
                    const ChannelLayout& l, double momentum) {
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

}  // namespace

Tensor batch_norm(const Tensor& x, Tensor running_mean, Tensor running_var, const Tensor& weight, const Tensor& bias,
                  bool training, double momentum, double eps) {
    const ChannelLayout l = check_batch_norm("batch_norm", x, running_mean, running_var, weight, bias, training);
    ChannelStats s = training ? batch_stats(x, l, eps) : running_stats(running_mean, running_var, eps);
    if (training) update_running(running_mean, running_var, s.mean, s.batch_var, l, momentum);

    const std::size_t C = l.channels;
    const std::vector<double> ones(weight.defined() ? 0 : C, 1.0), zeros(bias.defined() ? 0 : C, 0.0);
    Array y = empty_like(x.value());
    batch_norm_forward(x.data(), weight.defined() ? weight.data() : ones.data(), bias.defined() ? bias.data() : zeros.data(),
                       s.mean.data(), s.rstd.data(), y.data(), l);

    std::vector<Tensor> inputs{x};
    const int wi = weight.defined() ? static_cast<int>(inputs.size()) : -1;
    if (weight.defined()) inputs.push_back(weight);
    const int bi = bias.defined() ? static_cast<int>(inputs.size()) : -1;
    if (bias.defined()) inputs.push_back(bias);
    std::vector<SavedInfo> saved{{"mean", {C}}, {"rstd", {C}}};
    // training: dx = w rstd (g - mean(g) - xhat mean(g xhat)); eval: dx = w rstd g;
    // dw = sum g xhat, db = sum g (sums over N and L)
    return record(
        "batch_norm", std::move(y), std::move(inputs),
        [l, wi, bi, training, mean = std::move(s.mean), rstd = std::move(s.rstd)](const GradContext& c) -> Grads {
            Grads g(c.num_inputs());
            const std::vector<double> ones(wi < 0 ? l.channels : 0, 1.0);
            const double* w = wi < 0 ? ones.data() : c.input(static_cast<std::size_t>(wi)).data();
            Array dw = xt::zeros<double>({l.channels}), db = xt::zeros<double>({l.channels}), dx;
            if (c.needs_grad(0)) dx = empty_like(c.input(0));
            batch_norm_backward(c.input(0).data(), c.grad.data(), w, mean.data(), rstd.data(),
                                c.needs_grad(0) ? dx.data() : nullptr, dw.data(), db.data(), l, training);
            if (c.needs_grad(0)) g[0] = std::move(dx);
            if (wi >= 0 && c.needs_grad(static_cast<std::size_t>(wi))) g[static_cast<std::size_t>(wi)] = std::move(dw);
            if (bi >= 0 && c.needs_grad(static_cast<std::size_t>(bi))) g[static_cast<std::size_t>(bi)] = std::move(db);
            return g;
        },
        std::move(saved),
        // create_graph: the double backward differentiates the composed twin (docs/derivatives.md);
        // it recomputes the batch statistics but leaves the running ones alone (the forward
        // updated them), and in eval mode normalises with the running statistics of this call
        through_composed([wi, bi, training, eps, eval_mean = training ? Array() : running_mean.value(),
                          eval_var = training ? Array() : running_var.value()](const std::vector<Tensor>& in) {
            const Tensor w = wi < 0 ? Tensor() : in[static_cast<std::size_t>(wi)];
            const Tensor b = bi < 0 ? Tensor() : in[static_cast<std::size_t>(bi)];
            if (training) return batch_norm_composed(in[0], Tensor(), Tensor(), w, b, true, 0.0, eps);
            return batch_norm_composed(in[0], Tensor(eval_mean), Tensor(eval_var), w, b, false, 0.0, eps);
        }));
}

Tensor batch_norm_composed(const Tensor& x, Tensor running_mean, Tensor running_var, const Tensor& weight,
                           const Tensor& bias, bool training, double momentum, double eps) {
    const ChannelLayout l = check_batch_norm("batch_norm_composed", x, running_mean, running_var, weight, bias, training);
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
