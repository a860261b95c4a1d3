// SyncBatchNorm's forward and backward, one graph node, with the symbols of
// docs/derivations/sync_batchnorm.md: per channel c, M = the global count, mean and rstd the
// global statistics, g = dL/dy on this rank's rows.
#include "nn/modules/sync_batchnorm.hpp"

#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "core/distributed/collectives.hpp"
#include "nn/modules/image_norm.hpp"

namespace xg::nn {

namespace {

constexpr const char* kOp = "SyncBatchNorm";

// (N, C, *) as N rows of C channels of L values: element (i, c, l) at (i C + c) L + l.
struct Layout {
    std::size_t n, channels, length;
    std::size_t count() const { return n * length; }  // values per channel on this rank
    template <class F>
    void each(std::size_t c, F&& f) const {
        for (std::size_t i = 0; i < n; ++i) {
            const std::size_t row = (i * channels + c) * length;
            for (std::size_t l = 0; l < length; ++l) f(row + l);
        }
    }
};

Layout layout_of(const Shape& s) {
    Layout l{s[0], s[1], 1};
    for (std::size_t a = 2; a < s.size(); ++a) l.length *= s[a];
    return l;
}

struct GlobalStats {
    Array mean, rstd;
    Array sum_sq;  // sum over every rank of (x - mean)^2, per channel
    double count = 0.0;
};

// This rank's (count, mean, sum of squared deviations) per channel, by the corrected two-pass
// formula, gathered from every rank and merged in rank order (the same bits on every rank):
//   M = sum_r m_r, mean = sum_r m_r mean_r / M, S = sum_r (S_r + m_r (mean_r - mean)^2)
GlobalStats synchronised_stats(const double* x, const Layout& l, const Shape& shape, double eps) {
    const std::size_t C = l.channels;
    const double m = static_cast<double>(l.count());
    Array local = xt::zeros<double>({std::size_t{3}, C});  // rows: count, mean, sum of squares
    for (std::size_t c = 0; c < C; ++c) {
        local(0, c) = m;
        if (l.count() == 0) continue;
        double sum = 0.0;
        l.each(c, [&](std::size_t k) { sum += x[k]; });
        const double mean = sum / m;
        double dev = 0.0, dev_sq = 0.0;
        l.each(c, [&](std::size_t k) {
            const double d = x[k] - mean;
            dev += d;
            dev_sq += d * d;
        });
        local(1, c) = mean;
        local(2, c) = dev_sq - dev * dev / m;
    }
    const std::vector<Array> ranks = distributed::all_gather(local);
    GlobalStats s{xt::zeros<double>({C}), Array::from_shape({C}), xt::zeros<double>({C}), 0.0};
    for (const Array& r : ranks) s.count += r(0, 0);
    if (s.count <= 1.0) {
        fail(kOp, fmt::format("Expected more than 1 value per channel when training, got {} over {} ranks (input {} on "
                              "rank {})",
                              s.count, ranks.size(), shape_str(shape), distributed::rank()));
    }
    for (std::size_t c = 0; c < C; ++c) {
        for (const Array& r : ranks) s.mean(c) += r(0, c) * r(1, c);
        s.mean(c) /= s.count;
        for (const Array& r : ranks) {
            const double shift = r(1, c) - s.mean(c);
            s.sum_sq(c) += r(2, c) + r(0, c) * shift * shift;
        }
        s.rstd(c) = 1.0 / std::sqrt(s.sum_sq(c) / s.count + eps);
    }
    return s;
}

}  // namespace

SyncBatchNorm::SyncBatchNorm(std::int64_t num_features, double eps_, std::optional<double> momentum_, bool affine_,
                             bool track)
    : BatchNormBase("SyncBatchNorm", num_features, eps_, momentum_, affine_, track) {}

void SyncBatchNorm::check_input_dim(const Shape& s) const {
    if (s.size() < 2 || s[1] != num_features) {
        fail(kOp, fmt::format("expects an input (N, {}, *) with at least 2 axes, got {}", num_features, shape_str(s)));
    }
}

Tensor SyncBatchNorm::forward(const Tensor& x) {
    if (!x.defined()) fail(kOp, "input must be a defined tensor");
    // Evaluation (or no running statistics outside training): each rank on its own, as PyTorch.
    if (!is_training()) return BatchNormBase::forward(x);
    check_input_dim(x.shape());
    const Layout l = layout_of(x.shape());
    const std::size_t C = l.channels;
    GlobalStats s = synchronised_stats(x.data(), l, x.shape(), eps);

    if (track_running_stats) {
        // running = (1 - factor) running + factor stat, with the global unbiased variance S / (M - 1)
        const double batches = num_batches_tracked.item() + 1.0;
        const double factor = momentum ? *momentum : 1.0 / batches;
        for (std::size_t c = 0; c < C; ++c) {
            double& rm = running_mean.mutable_value()(c);
            rm = (1.0 - factor) * rm + factor * s.mean(c);
            double& rv = running_var.mutable_value()(c);
            rv = (1.0 - factor) * rv + factor * s.sum_sq(c) / (s.count - 1.0);
        }
        num_batches_tracked.mutable_value()() = batches;
    }

    const double* xv = x.data();
    Array y = Array::from_shape(x.shape());
    double* yv = y.data();
    for (std::size_t c = 0; c < C; ++c) {
        const double w = weight.defined() ? weight.value()(c) : 1.0, b = bias.defined() ? bias.value()(c) : 0.0;
        const double scale = s.rstd(c) * w, mean = s.mean(c);
        l.each(c, [&](std::size_t k) { yv[k] = (xv[k] - mean) * scale + b; });
    }

    std::vector<Tensor> inputs{x};
    const int wi = weight.defined() ? static_cast<int>(inputs.size()) : -1;
    if (weight.defined()) inputs.push_back(weight);
    const int bi = bias.defined() ? static_cast<int>(inputs.size()) : -1;
    if (bias.defined()) inputs.push_back(bias);
    std::vector<SavedInfo> saved{{"mean", {C}}, {"rstd", {C}}};
    // dx = w rstd (g - sum_all(g)/M - (x - mean) rstd^2 sum_all(g (x - mean))/M), the sums over
    // every rank (one all_reduce of 2C values); dw = rstd sum g (x - mean), db = sum g, this rank's
    return record(
        "sync_batch_norm", std::move(y), std::move(inputs),
        [l, wi, bi, M = s.count, mean = std::move(s.mean), rstd = std::move(s.rstd)](const GradContext& ctx) -> Grads {
            const std::size_t C = l.channels;
            const double* xv = ctx.input(0).data();
            const double* g = ctx.grad.data();
            Array sums = xt::zeros<double>({std::size_t{2}, C});  // rows: sum g, sum g (x - mean)
            for (std::size_t c = 0; c < C; ++c) {
                l.each(c, [&](std::size_t k) {
                    sums(0, c) += g[k];
                    sums(1, c) += g[k] * (xv[k] - mean(c));
                });
            }
            Grads grads(ctx.num_inputs());
            if (wi >= 0 && ctx.needs_grad(static_cast<std::size_t>(wi))) {
                Array dw = Array::from_shape({C});
                for (std::size_t c = 0; c < C; ++c) dw(c) = rstd(c) * sums(1, c);
                grads[static_cast<std::size_t>(wi)] = std::move(dw);
            }
            if (bi >= 0 && ctx.needs_grad(static_cast<std::size_t>(bi))) {
                Array db = Array::from_shape({C});
                for (std::size_t c = 0; c < C; ++c) db(c) = sums(0, c);
                grads[static_cast<std::size_t>(bi)] = std::move(db);
            }
            if (!ctx.needs_grad(0)) return grads;
            distributed::all_reduce(sums);
            Array dx = Array::from_shape(ctx.input_shape(0));
            double* dxv = dx.data();
            for (std::size_t c = 0; c < C; ++c) {
                const double w = wi < 0 ? 1.0 : ctx.input(static_cast<std::size_t>(wi))(c);
                const double w_rstd = w * rstd(c), mean_g = sums(0, c) / M;
                const double slope = w_rstd * rstd(c) * rstd(c) * sums(1, c) / M;
                l.each(c, [&](std::size_t k) { dxv[k] = w_rstd * (g[k] - mean_g) - slope * (xv[k] - mean(c)); });
            }
            grads[0] = std::move(dx);
            return grads;
        },
        std::move(saved));
}

std::shared_ptr<Module> convert_sync_batchnorm(std::shared_ptr<Module> module) {
    if (!module) fail("convert_sync_batchnorm", "the module is null");
    auto as_batch_norm = std::dynamic_pointer_cast<BatchNormBase>(module);
    const bool convertible = as_batch_norm && (std::dynamic_pointer_cast<BatchNorm1d>(module) ||
                                               std::dynamic_pointer_cast<BatchNorm2d>(module));
    if (convertible) {
        const BatchNormBase& bn = *as_batch_norm;
        auto sync = std::make_shared<SyncBatchNorm>(static_cast<std::int64_t>(bn.num_features), bn.eps, bn.momentum,
                                                    bn.affine, bn.track_running_stats);
        sync->load_state_dict(bn.state_dict());
        sync->train(bn.is_training());
        return sync;
    }
    std::vector<std::pair<std::string, std::shared_ptr<Module>>> children = module->named_children();
    for (auto& [name, child] : children) {
        std::shared_ptr<Module> converted = convert_sync_batchnorm(child);
        if (converted != child) module->replace_module(name, std::move(converted));
    }
    return module;
}

}  // namespace xg::nn
