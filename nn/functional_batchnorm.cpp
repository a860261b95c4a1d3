// BatchNorm over (N, C) or (N, C, L) as one graph node. Channel c's M = N*L values sit in N
// contiguous segments of length L (x[(n*C + c)*L + l]); every loop walks those segments.
// Derivation of the backward (through the batch statistics): docs/derivations/batchnorm.md.
#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "nn/functional.hpp"

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
    if (sx.size() != 2 && sx.size() != 3) fail(op, fmt::format("expects a (N, C) or (N, C, L) input, got {}", shape_str(sx)));
    check_channel_vector(op, "weight", weight, sx);
    check_channel_vector(op, "bias", bias, sx);
    check_channel_vector(op, "running_mean", running_mean, sx);
    check_channel_vector(op, "running_var", running_var, sx);
    BatchLayout l{sx[0], sx[1], sx.size() == 3 ? sx[2] : 1};
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

// Calls f(channel, pointer to a segment of `length` values) for every (n, c), in memory order.
template <class F>
void for_each_segment(const BatchLayout& l, F&& f) {
    for (std::size_t i = 0; i < l.n; ++i) {
        for (std::size_t c = 0; c < l.channels; ++c) f(c, (i * l.channels + c) * l.length);
    }
}

struct ChannelStats {
    Array mean, rstd;     // used to normalise (batch or running statistics)
    Array batch_var;      // biased batch variance (training only)
};

// Corrected two-pass statistics per channel (as in layer_norm): sum(d) of the second pass is
// the rounding error of the first-pass mean; adding it back makes constant channels exact.
ChannelStats batch_stats(const double* x, const BatchLayout& l, double eps) {
    const std::size_t C = l.channels, L = l.length;
    const double count = static_cast<double>(l.per_channel());
    std::vector<double> sum(C, 0.0), sd(C, 0.0), sd2(C, 0.0);
    for_each_segment(l, [&](std::size_t c, std::size_t off) {
        double s = 0.0;
#pragma omp simd reduction(+ : s)
        for (std::size_t j = 0; j < L; ++j) s += x[off + j];
        sum[c] += s;
    });
    for (std::size_t c = 0; c < C; ++c) sum[c] /= count;
    for_each_segment(l, [&](std::size_t c, std::size_t off) {
        const double m = sum[c];
        double a = 0.0, b = 0.0;
#pragma omp simd reduction(+ : a, b)
        for (std::size_t j = 0; j < L; ++j) {
            const double d = x[off + j] - m;
            a += d;
            b += d * d;
        }
        sd[c] += a;
        sd2[c] += b;
    });
    ChannelStats s{Array::from_shape({C}), Array::from_shape({C}), Array::from_shape({C})};
    for (std::size_t c = 0; c < C; ++c) {
        s.batch_var(c) = std::max(0.0, (sd2[c] - sd[c] * sd[c] / count) / count);
        s.mean(c) = sum[c] + sd[c] / count;
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

}  // namespace

Tensor batch_norm(const Tensor& x, Tensor running_mean, Tensor running_var, const Tensor& weight, const Tensor& bias,
                  bool training, double momentum, double eps) {
    const BatchLayout l = check_batch_norm("batch_norm", x, running_mean, running_var, weight, bias, training);
    ChannelStats s = training ? batch_stats(x.data(), l, eps) : running_stats(running_mean, running_var, eps);
    if (training) update_running(running_mean, running_var, s.mean, s.batch_var, l, momentum);

    const std::size_t C = l.channels, L = l.length;
    std::vector<double> scale(C), shift(C);  // y = (x - mean) * rstd * w + b = (x - mean) * scale + shift
    for (std::size_t c = 0; c < C; ++c) {
        scale[c] = s.rstd(c) * (weight.defined() ? weight.value()(c) : 1.0);
        shift[c] = bias.defined() ? bias.value()(c) : 0.0;
    }
    Array y = Array::from_shape(x.value().shape());
    const double* px = x.data();
    double* py = y.data();
    for_each_segment(l, [&](std::size_t c, std::size_t off) {
        const double m = s.mean(c), a = scale[c], b = shift[c];
#pragma omp simd
        for (std::size_t j = 0; j < L; ++j) py[off + j] = (px[off + j] - m) * a + b;
    });

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
            const std::size_t C = l.channels, L = l.length;
            const double *px = c.input(0).data(), *pg = c.grad.data();
            std::vector<double> sum_g(C, 0.0), sum_g_xhat(C, 0.0);
            for_each_segment(l, [&](std::size_t ch, std::size_t off) {
                const double m = mean(ch), r = rstd(ch);
                double a = 0.0, b = 0.0;
#pragma omp simd reduction(+ : a, b)
                for (std::size_t j = 0; j < L; ++j) {
                    a += pg[off + j];
                    b += pg[off + j] * (px[off + j] - m) * r;
                }
                sum_g[ch] += a;
                sum_g_xhat[ch] += b;
            });
            Grads g(c.inputs.size());
            if (c.needs_grad(0)) {
                const double inv_count = 1.0 / static_cast<double>(l.per_channel());
                Array dx = Array::from_shape(c.input(0).shape());
                double* pd = dx.data();
                for_each_segment(l, [&](std::size_t ch, std::size_t off) {
                    const double m = mean(ch), r = rstd(ch);
                    const double k = r * (wi >= 0 ? c.input(static_cast<std::size_t>(wi))(ch) : 1.0);
                    // In eval mode the statistics are constants: only the direct term remains.
                    const double mg = training ? sum_g[ch] * inv_count : 0.0;
                    const double mgx = training ? sum_g_xhat[ch] * inv_count : 0.0;
#pragma omp simd
                    for (std::size_t j = 0; j < L; ++j) pd[off + j] = k * (pg[off + j] - mg - (px[off + j] - m) * r * mgx);
                });
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
    const bool has_length = x.dim() == 3;
    const Axes axes = has_length ? Axes{0, 2} : Axes{0};
    const std::vector<long> channel_shape = has_length ? std::vector<long>{static_cast<long>(l.channels), 1}
                                                       : std::vector<long>{static_cast<long>(l.channels)};
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
