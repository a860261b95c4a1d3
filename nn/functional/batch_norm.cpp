// BatchNorm over (N, C) or (N, C, L) as one graph node; (N, C, H, W) and any (N, C, *) are
// (N, C, L) with L the product of the trailing axes. The kernels: nn/reference/batch_norm.cpp (the
// formulas of docs/derivations/batchnorm.md as plain loops) and nn/fast/batch_norm.cpp (tested
// against it).
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "core/ops/composed_backward.hpp"
#include "nn/fast/batch_norm.hpp"
#include "nn/functional/affine.hpp"
#include "nn/functional/functional.hpp"
#include "nn/functional/running_stats.hpp"
#include "nn/functional/tier.hpp"
#include "nn/reference/batch_norm.hpp"

namespace xg::nn::functional {

namespace {

// (N, C, L): channel c's values are N segments of L.
struct ChannelLayout {
    std::size_t n = 0, channels = 0, length = 1;
    std::size_t per_channel() const { return n * length; }
};

ChannelLayout check_batch_norm(const char* op, const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                               const Tensor& weight, const Tensor& bias, bool training) {
    if (!x.defined()) fail(op, "input must be a defined tensor");
    const Shape sx = x.shape();
    if (sx.size() < 2) fail(op, fmt::format("expects an input (N, C, *), e.g. (N, C) or (N, C, H, W), got {}", shape_str(sx)));
    detail::check_per_channel(op, "weight", weight, sx);
    detail::check_per_channel(op, "bias", bias, sx);
    detail::check_per_channel(op, "running_mean", running_mean, sx);
    detail::check_per_channel(op, "running_var", running_var, sx);
    ChannelLayout l{sx[0], sx[1], 1};
    for (std::size_t a = 2; a < sx.size(); ++a) l.length *= sx[a];  // (N, C, H, W) is (N, C, L = H W)
    // One value per channel has no variance; none at all (an empty batch, e.g. a data-parallel
    // rank's share) gives an empty output, as PyTorch.
    if (training && l.per_channel() == 1) {
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

struct ChannelStats {
    Array mean, rstd;  // used to normalise (batch or running statistics)
    Array batch_var;   // biased batch variance (training only)
};

template <class T>
ChannelStats batch_stats(const Tensor& x, const ChannelLayout& l, double eps) {
    ChannelStats s{Array::from_shape({l.channels}), Array::from_shape({l.channels}), Array::from_shape({l.channels})};
    detail::by_tier(reference::batch_norm_stats<T>, fast::batch_norm_stats<T>, detail::kernel_values<T>(x).data(), s.mean.data(),
                    s.batch_var.data(), l.n, l.channels, l.length);
    for (std::size_t c = 0; c < l.channels; ++c) s.rstd(c) = 1.0 / std::sqrt(s.batch_var(c) + eps);
    return s;
}

ChannelStats running_stats(const Tensor& running_mean, const Tensor& running_var, double eps) {
    const Array var = detail::float64_values(running_var);
    ChannelStats s{detail::float64_values(running_mean), Array::from_shape(var.shape()), Array()};
    for (std::size_t c = 0; c < s.rstd.size(); ++c) s.rstd(c) = 1.0 / std::sqrt(var(c) + eps);
    return s;
}

// running = (1 - momentum) running + momentum batch_stat, with the unbiased variance for running_var.
void update_running(Tensor& running_mean, Tensor& running_var, const Array& mean, const Array& biased_var,
                    const ChannelLayout& l, double momentum) {
    const double count = static_cast<double>(l.per_channel());
    const double unbias = count / (count - 1.0);
    detail::update_running_statistic(running_mean, momentum, [&](std::size_t c) { return momentum * mean(c); });
    detail::update_running_statistic(running_var, momentum, [&](std::size_t c) { return momentum * biased_var(c) * unbias; });
}

// One node for every storage type: T = x's storage type when weight and bias share its dtype (the
// kernels read and write that storage, recorded native, so no float64 mirror of x, weight or bias
// is made); T = double otherwise (float64, or mixed dtypes read as float64 values). The
// running statistics keep their own dtype and are read and updated in their own storage either way.
template <class T>
Tensor batch_norm_node(const Tensor& x, Tensor& running_mean, Tensor& running_var, const Tensor& weight, const Tensor& bias,
                       bool training, double momentum, double eps, const ChannelLayout& l) {
    const bool empty = l.per_channel() == 0;
    ChannelStats s = !training ? running_stats(running_mean, running_var, eps)
                     : empty   ? ChannelStats{xt::zeros<double>({l.channels}), xt::ones<double>({l.channels}), Array()}
                               : batch_stats<T>(x, l, eps);
    if (training && !empty) update_running(running_mean, running_var, s.mean, s.batch_var, l, momentum);

    const std::size_t C = l.channels;
    const detail::BasicValuesOr<T> w(weight, C, 1.0), b(bias, C, 0.0);
    const xt::xarray<T>& xv = detail::kernel_values<T>(x);
    xt::xarray<T> y = xt::xarray<T>::from_shape(xv.shape());
    detail::by_tier(reference::batch_norm_forward<T>, fast::batch_norm_forward<T>, xv.data(), w.data(), b.data(), s.mean.data(),
                    s.rstd.data(), y.data(), l.n, C, l.length);

    const detail::AffineSlots affine(weight, bias);
    std::vector<SavedInfo> saved{{"mean", {C}}, {"rstd", {C}}};
    // training: dx = w rstd (g - mean(g) - xhat mean(g xhat)); eval: dx = w rstd g;
    // dw = sum g xhat, db = sum g (sums over N and L)
    return record(
        "batch_norm", std::move(y), affine.inputs(x, weight, bias),
        [l, affine, training, mean = std::move(s.mean), rstd = std::move(s.rstd)](const GradContext& c) -> Grads {
            const detail::BasicValuesOr<T> w(affine.weight_values<T>(c), l.channels, 1.0);
            const xt::xarray<T>& xv = detail::kernel_input<T>(c, 0);
            Array dw = xt::zeros<double>({l.channels}), db = xt::zeros<double>({l.channels});  // double sums: docs/precision.md
            xt::xarray<T> dx;
            if (c.needs_grad(0)) dx = xt::xarray<T>::from_shape(xv.shape());
            detail::by_tier(reference::batch_norm_backward<T>, fast::batch_norm_backward<T>, xv.data(),
                            detail::kernel_grad<T>(c).data(), w.data(), mean.data(), rstd.data(),
                            c.needs_grad(0) ? dx.data() : nullptr, dw.data(), db.data(), l.n, l.channels, l.length, training);
            Grads g(c.num_inputs());
            if (c.needs_grad(0)) g[0] = std::move(dx);
            affine.put_grads(c, g, detail::stored_as<T>(std::move(dw)), detail::stored_as<T>(std::move(db)));
            return g;
        },
        std::move(saved),
        // create_graph: the double backward differentiates the composed twin (docs/derivatives.md);
        // it recomputes the batch statistics but leaves the running ones alone (the forward
        // updated them), and in eval mode normalises with the running statistics of this call
        through_composed([affine, training, eps, eval_mean = training ? Array() : detail::float64_values(running_mean),
                          eval_var = training ? Array() : detail::float64_values(running_var)](const std::vector<Tensor>& in) {
            const Tensor w = affine.weight(in), b = affine.bias(in);
            if (training) return batch_norm_composed(in[0], Tensor(), Tensor(), w, b, true, 0.0, eps);
            // the running statistics in x's dtype (a float32 module keeps them float32: no rounding here)
            return batch_norm_composed(in[0], Tensor(eval_mean, in[0].dtype()), Tensor(eval_var, in[0].dtype()), w, b, false,
                                       0.0, eps);
        }));
}

}  // namespace

Tensor batch_norm(const Tensor& x, Tensor running_mean, Tensor running_var, const Tensor& weight, const Tensor& bias,
                  bool training, double momentum, double eps) {
    const ChannelLayout l = check_batch_norm("batch_norm", x, running_mean, running_var, weight, bias, training);
    return detail::on_common_storage(x, {&weight, &bias}, [&](auto storage) {
        return batch_norm_node<typename decltype(storage)::type>(x, running_mean, running_var, weight, bias, training, momentum, eps, l);
    });
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
    if (training && l.per_channel() == 0) {
        y = x;  // an empty batch has no statistics and nothing to normalise (batch_norm: an empty output)
    } else if (training) {
        const Tensor mu = mean(x, axes, true);
        const Tensor variance = var(x, axes, false, true);
        y = (x - mu) / sqrt(variance + eps);
        update_running(running_mean, running_var, flat(detail::float64_values(mu)), flat(detail::float64_values(variance)), l,
                       momentum);
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
