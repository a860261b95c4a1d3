// SyncBatchNorm's forward and backward, one graph node, with the symbols of
// docs/derivations/sync_batchnorm.md: per channel c, M = the global count, mean and rstd the
// global statistics, g = dL/dy on this rank's rows. The loops are batch_norm's kernels
// (nn/reference/batch_norm.cpp, nn/fast/batch_norm.cpp): only the statistics and the two sums of
// the backward cross between ranks.
#include "distributed/sync_batchnorm.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "distributed/collectives.hpp"
#include "nn/fast/batch_norm.hpp"
#include "nn/functional/affine.hpp"
#include "nn/functional/running_stats.hpp"
#include "nn/functional/tier.hpp"
#include "nn/modules/image_norm.hpp"
#include "nn/reference/batch_norm.hpp"

namespace xg::nn {

namespace {

constexpr const char* kOp = "SyncBatchNorm";

// (N, C, *) as N rows of C channels of L values: element (i, c, l) at (i C + c) L + l, batch_norm's
// channel layout.
struct Layout {
    std::size_t n, channels, length;
    std::size_t count() const { return n * length; }  // values per channel on this rank
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
// T is x's storage type (BatchNorm's kernels: the per-rank statistics are double whatever T, so
// what crosses between ranks and the merge are double).
template <class T>
GlobalStats synchronised_stats(const T* x, const Layout& l, const Shape& shape, double eps) {
    const std::size_t C = l.channels;
    const double m = static_cast<double>(l.count());
    Array local = xt::zeros<double>({std::size_t{3}, C});  // rows: count, mean, sum of squares
    std::vector<double> mean(C), var(C);
    if (l.count() > 0) {
        detail::by_tier(reference::batch_norm_stats<T>, fast::batch_norm_stats<T>, x, mean.data(), var.data(), l.n, C, l.length);
    }
    for (std::size_t c = 0; c < C; ++c) {
        local(0, c) = m;
        if (l.count() == 0) continue;
        local(1, c) = mean[c];
        local(2, c) = var[c] * m;  // S_r = m_r var_r
    }
    const std::vector<Array> ranks = distributed::all_gather(local);
    // Every rank sees every count, so all of them throw together (no rank is left in a collective).
    if (std::any_of(ranks.begin(), ranks.end(), [C](const Array& r) { return r.shape(1) != C; })) {
        std::vector<std::string> counts;
        for (std::size_t r = 0; r < ranks.size(); ++r) counts.push_back(fmt::format("rank {}: {}", r, ranks[r].shape(1)));
        fail(kOp, fmt::format("every rank must have the same number of channels, got {} (input {} on rank {})",
                              fmt::join(counts, ", "), shape_str(shape), distributed::rank()));
    }
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

namespace {

// The training forward as one node for both storage types, as batch_norm's batch_norm_node<T>:
// T = float when x, weight and bias are all float32 (BatchNorm's kernels read and write their
// float32 storage, so no float64 mirror of x, weight, bias, y or the seed is made); T = double
// otherwise (float64, or mixed dtypes read as float64 values). The statistics, the sums that cross
// between ranks and dw, db are double whatever T; y and dx are rounded once at their store, dw and
// db once at the end.
template <class T>
Tensor sync_batch_norm_node(const Tensor& x, const Tensor& weight, const Tensor& bias, GlobalStats s, const Layout& l) {
    const std::size_t C = l.channels;
    const detail::BasicValuesOr<T> w(weight, C, 1.0), b(bias, C, 0.0);
    const xt::xarray<T>& xv = detail::kernel_values<T>(x);
    xt::xarray<T> y = xt::xarray<T>::from_shape(xv.shape());
    if (l.count() > 0) {
        detail::by_tier(reference::batch_norm_forward<T>, fast::batch_norm_forward<T>, xv.data(), w.data(), b.data(),
                        s.mean.data(), s.rstd.data(), y.data(), l.n, C, l.length);
    }

    const detail::AffineSlots affine(weight, bias);
    std::vector<SavedInfo> saved{{"mean", {C}}, {"rstd", {C}}};
    // dx = w rstd (g - sum_all(g)/M - (x - mean) rstd^2 sum_all(g (x - mean))/M), the sums over
    // every rank (one all_reduce of 2C values); dw = rstd sum g (x - mean), db = sum g, this rank's
    return record(
        "sync_batch_norm", std::move(y), affine.inputs(x, weight, bias),
        [l, affine, M = s.count, mean = std::move(s.mean), rstd = std::move(s.rstd)](const GradContext& ctx) -> Grads {
            const std::size_t C = l.channels;
            const detail::BasicValuesOr<T> w(affine.weight_values<T>(ctx), C, 1.0);
            const xt::xarray<T>& xv = detail::kernel_input<T>(ctx, 0);
            const xt::xarray<T>& g = detail::kernel_grad<T>(ctx);
            // rows: sum g (db) and sum g xhat (dw) over this rank's values, then over every rank's
            Array sums = xt::zeros<double>({std::size_t{2}, C});
            double *sum_g = sums.data(), *sum_g_xhat = sums.data() + C;
            if (l.count() > 0) {
                detail::by_tier(reference::batch_norm_backward<T>, fast::batch_norm_backward<T>, xv.data(), g.data(), w.data(),
                                mean.data(), rstd.data(), nullptr, sum_g_xhat, sum_g, l.n, C, l.length, true);
            }
            Grads grads(ctx.num_inputs());
            Array db = Array::from_shape({C}), dw = Array::from_shape({C});
            std::copy(sum_g, sum_g + C, db.data());
            std::copy(sum_g_xhat, sum_g_xhat + C, dw.data());
            affine.put_grads(ctx, grads, detail::stored_as<T>(std::move(dw)), detail::stored_as<T>(std::move(db)));
            if (!ctx.needs_grad(0)) return grads;
            distributed::all_reduce(sums);
            std::vector<double> mean_g(C), mean_g_xhat(C);
            for (std::size_t c = 0; c < C; ++c) {
                mean_g[c] = sum_g[c] / M;
                mean_g_xhat[c] = sum_g_xhat[c] / M;
            }
            xt::xarray<T> dx = xt::xarray<T>::from_shape(xv.shape());
            if (l.count() > 0) {
                detail::by_tier(reference::batch_norm_input_grad<T>, fast::batch_norm_input_grad<T>, xv.data(), g.data(),
                                w.data(), mean.data(), rstd.data(), mean_g.data(), mean_g_xhat.data(), dx.data(), l.n, C,
                                l.length);
            }
            grads[0] = std::move(dx);
            return grads;
        },
        std::move(saved));
}

}  // namespace

Tensor SyncBatchNorm::forward(const Tensor& x) {
    if (!x.defined()) fail(kOp, "input must be a defined tensor");
    // Evaluation (or no running statistics outside training): each rank on its own, as PyTorch.
    if (!is_training()) return BatchNormBase::forward(x);
    check_input_dim(x.shape());
    const Layout l = layout_of(x.shape());
    return detail::on_common_storage(x, {&weight, &bias}, [&](auto storage) {
        using T = typename decltype(storage)::type;
        GlobalStats s = synchronised_stats(detail::kernel_values<T>(x).data(), l, x.shape(), eps);
        if (track_running_stats) {
            // running = (1 - factor) running + factor stat, with the global unbiased variance S / (M - 1)
            const double batches = num_batches_tracked.item() + 1.0;
            const double factor = momentum ? *momentum : 1.0 / batches;
            detail::update_running_statistic(running_mean, factor, [&](std::size_t c) { return factor * s.mean(c); });
            detail::update_running_statistic(running_var, factor,
                                             [&](std::size_t c) { return factor * s.sum_sq(c) / (s.count - 1.0); });
            num_batches_tracked.mutable_value()() = batches;
        }
        return sync_batch_norm_node<T>(x, weight, bias, std::move(s), l);
    });
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
        // The BatchNorm's own tensors, not copies (PyTorch's conversion): their dtype, their
        // requires_grad, and an optimizer made before the conversion still trains the layer.
        for (const auto& [name, member] : {std::pair{"weight", &bn.weight}, std::pair{"bias", &bn.bias}}) {
            if (!member->defined()) continue;
            Tensor own = *member;
            const bool requires_grad = own.requires_grad();
            sync->replace_parameter(name, own);
            own.requires_grad_(requires_grad);
        }
        for (const auto& [name, from, to] : {std::tuple{"running_mean", &bn.running_mean, &sync->running_mean},
                                             std::tuple{"running_var", &bn.running_var, &sync->running_var},
                                             std::tuple{"num_batches_tracked", &bn.num_batches_tracked,
                                                        &sync->num_batches_tracked}}) {
            if (!from->defined()) continue;
            sync->replace_buffer(name, *from);
            *to = *from;
        }
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
