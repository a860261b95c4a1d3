// GroupNorm as one graph node, and InstanceNorm (GroupNorm with one channel per group) on the
// same kernels. x is (N, C, *); a row is one sample's group: C/G channels of S = prod(*) values,
// D = (C/G) S elements, contiguous. Statistics per row as LayerNorm's; the affine is per channel.
// The kernels follow docs/derivations/groupnorm.md with its symbols; their loops are in
// nn/fast/kernel_primitives.hpp.
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "core/engine/composed_backward.hpp"
#include "core/fast/parallel.hpp"
#include "nn/functional/functional.hpp"
#include "nn/fast/kernel_primitives.hpp"

namespace xg::nn::functional {

namespace {

using detail::OutputStore;

struct GroupLayout {
    std::size_t n = 0, channels = 0, groups = 1, spatial = 1;  // N, C, G, S
    std::size_t rows() const { return n * groups; }
    std::size_t channels_per_group() const { return channels / groups; }
    std::size_t width() const { return channels_per_group() * spatial; }  // D
    std::size_t channel(std::size_t row, std::size_t k) const { return (row % groups) * channels_per_group() + k; }
};

void check_channel_param(const char* op, const char* name, const Tensor& t, const Shape& sx) {
    if (t.defined() && t.shape() != Shape{sx[1]}) {
        fail(op, fmt::format("{} must have shape ({},) for input {} with {} channels, got {}", name, sx[1], shape_str(sx), sx[1],
                             shape_str(t.shape())));
    }
}

GroupLayout check_group_norm(const char* op, const Tensor& x, std::int64_t num_groups, const Tensor& weight,
                             const Tensor& bias) {
    if (!x.defined()) fail(op, "input must be a defined tensor");
    const Shape sx = x.shape();
    if (sx.size() < 2) fail(op, fmt::format("expects an input (N, C, *), got {}", shape_str(sx)));
    if (num_groups <= 0 || sx[1] % static_cast<std::size_t>(num_groups) != 0) {
        fail(op, fmt::format("the {} channels of input {} must split into num_groups = {} equal groups", sx[1], shape_str(sx),
                             num_groups));
    }
    check_channel_param(op, "weight", weight, sx);
    check_channel_param(op, "bias", bias, sx);
    GroupLayout l{sx[0], sx[1], static_cast<std::size_t>(num_groups), 1};
    for (std::size_t a = 2; a < sx.size(); ++a) l.spatial *= sx[a];
    if (l.width() == 0) fail(op, fmt::format("cannot normalise empty groups (input {})", shape_str(sx)));
    return l;
}

// Per row r in [r0, r1): mean, var (kept for InstanceNorm's running statistics), rstd = 1 / sqrt(var + eps),
// xhat = (x - mean) rstd, and per channel c of the row y = xhat w_c + b_c.
XG_KERNEL_CLONES void group_norm_forward(const double* x, const double* w, const double* b, double* y, double* row_mean,
                                         double* row_rstd, double* row_var, const GroupLayout& l, double eps, std::size_t r0,
                                         std::size_t r1) {
    const std::size_t S = l.spatial, D = l.width();
    const OutputStore store(y, l.rows() * D, S);
    for (std::size_t r = r0; r < r1; ++r) {
        double mean, var;
        detail::row_mean_var(x + r * D, D, mean, var);
        const double rstd = 1.0 / std::sqrt(var + eps);
        row_mean[r] = mean;
        row_var[r] = var;
        row_rstd[r] = rstd;
        for (std::size_t k = 0; k < l.channels_per_group(); ++k) {  // channel c: S values of the row
            const std::size_t c = l.channel(r, k);
            const double *xc = x + r * D + k * S, wc = w[c], bc = b[c];
            const auto xhat = [=](std::size_t j) { return (xc[j] - mean) * rstd; };
            store(y + r * D + k * S, S, [=](std::size_t j) { return xhat(j) * wc + bc; });
        }
    }
}

// Per row, with g = dL/dy and dxhat = g w_c:
//   dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat));  dw_c += g xhat, db_c += g.
// Channel c's part of sum(dxhat) is w_c sum(g), of sum(dxhat xhat) w_c sum(g xhat): the two sums
// dw and db need anyway, so pass 1 takes them per channel; pass 2 writes dx. Rows [r0, r1); dw
// and db are this range's partial sums.
XG_KERNEL_CLONES void group_norm_backward(const double* x, const double* g, const double* w, const double* row_mean,
                                          const double* row_rstd, double* dx, double* dw, double* db, const GroupLayout& l,
                                          std::size_t r0, std::size_t r1) {
    const std::size_t S = l.spatial, D = l.width();
    const OutputStore store(dx, l.rows() * D, S);
    for (std::size_t r = r0; r < r1; ++r) {
        const double mean = row_mean[r], rstd = row_rstd[r];
        double sum_dxhat = 0.0, sum_dxhat_xhat = 0.0;
        for (std::size_t k = 0; k < l.channels_per_group(); ++k) {
            const std::size_t c = l.channel(r, k);
            const double *xc = x + r * D + k * S, *gc = g + r * D + k * S;
            const auto [sum_g, sum_g_xhat] =
                detail::row_sums(S, [=](std::size_t j) { return std::pair{gc[j], gc[j] * (xc[j] - mean) * rstd}; });
            db[c] += sum_g;
            dw[c] += sum_g_xhat;
            sum_dxhat += w[c] * sum_g;
            sum_dxhat_xhat += w[c] * sum_g_xhat;
        }
        if (dx == nullptr) continue;
        const double mean_dxhat = sum_dxhat / static_cast<double>(D), mean_dxhat_xhat = sum_dxhat_xhat / static_cast<double>(D);
        for (std::size_t k = 0; k < l.channels_per_group(); ++k) {
            const std::size_t c = l.channel(r, k);
            const double *xc = x + r * D + k * S, *gc = g + r * D + k * S, wc = w[c];
            const auto xhat = [=](std::size_t j) { return (xc[j] - mean) * rstd; };
            store(dx + r * D + k * S, S, [=](std::size_t j) { return rstd * (gc[j] * wc - mean_dxhat - xhat(j) * mean_dxhat_xhat); });
        }
    }
}

struct RowStats {
    Array mean, var;
};

Tensor group_norm_graph(const Tensor& x, const GroupLayout& l, const Tensor& weight, const Tensor& bias, double eps,
                        RowStats* stats = nullptr);

// The group_norm node (op "group_norm", or "instance_norm" with one channel per group); the row
// statistics come back for InstanceNorm's running estimates.
Tensor group_norm_node(const char* op, const Tensor& x, const GroupLayout& l, const Tensor& weight, const Tensor& bias,
                       double eps, RowStats* stats = nullptr) {
    const std::size_t C = l.channels;
    const std::vector<double> ones(weight.defined() ? 0 : C, 1.0), zeros(bias.defined() ? 0 : C, 0.0);
    Array y = empty_like(x.value());
    Array mean = Array::from_shape({l.rows()}), rstd = Array::from_shape({l.rows()}), var = Array::from_shape({l.rows()});
    const double *w = weight.defined() ? weight.data() : ones.data(), *b = bias.defined() ? bias.data() : zeros.data();
    xg::detail::parallel_for(l.rows(), l.width(), [&](std::size_t r0, std::size_t r1) {
        group_norm_forward(x.data(), w, b, y.data(), mean.data(), rstd.data(), var.data(), l, eps, r0, r1);
    });
    if (stats != nullptr) *stats = {mean, var};

    std::vector<Tensor> inputs{x};
    const int wi = weight.defined() ? static_cast<int>(inputs.size()) : -1;
    if (weight.defined()) inputs.push_back(weight);
    const int bi = bias.defined() ? static_cast<int>(inputs.size()) : -1;
    if (bias.defined()) inputs.push_back(bias);
    std::vector<SavedInfo> saved{{"mean", {l.rows()}}, {"rstd", {l.rows()}}};
    // dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)) per row, dxhat = g w_c; dw_c = sum g xhat; db_c = sum g
    return record(
        op, std::move(y), std::move(inputs),
        [l, wi, bi, mean = std::move(mean), rstd = std::move(rstd)](const GradContext& c) -> Grads {
            Grads g(c.num_inputs());
            const std::vector<double> ones(wi < 0 ? l.channels : 0, 1.0);
            const double* w = wi < 0 ? ones.data() : c.input(static_cast<std::size_t>(wi)).data();
            Array dw = xt::zeros<double>({l.channels}), db = xt::zeros<double>({l.channels}), dx;
            if (c.needs_grad(0)) dx = empty_like(c.input(0));
            double* pdx = c.needs_grad(0) ? dx.data() : nullptr;
            xg::detail::sums_over_chunks(l.rows(), l.width(), l.channels, dw.data(), db.data(),
                                         [&](std::size_t r0, std::size_t r1, double* dw_part, double* db_part) {
                group_norm_backward(c.input(0).data(), c.grad.data(), w, mean.data(), rstd.data(), pdx, dw_part, db_part, l, r0, r1);
            });
            if (c.needs_grad(0)) g[0] = std::move(dx);
            if (wi >= 0 && c.needs_grad(static_cast<std::size_t>(wi))) g[static_cast<std::size_t>(wi)] = std::move(dw);
            if (bi >= 0 && c.needs_grad(static_cast<std::size_t>(bi))) g[static_cast<std::size_t>(bi)] = std::move(db);
            return g;
        },
        std::move(saved),
        // create_graph: the double backward differentiates the composed twin (docs/derivatives.md)
        through_composed([l, wi, bi, eps](const std::vector<Tensor>& in) {
            return group_norm_graph(in[0], l, wi < 0 ? Tensor() : in[static_cast<std::size_t>(wi)],
                                    bi < 0 ? Tensor() : in[static_cast<std::size_t>(bi)], eps);
        }));
}

// (N, C, *) -> (C, 1, ..., 1): a per-channel tensor that broadcasts against x.
std::vector<long> channel_shape(const Tensor& x) {
    std::vector<long> s{static_cast<long>(x.size(1))};
    s.resize(x.dim() - 1, 1);
    return s;
}

Tensor group_norm_graph(const Tensor& x, const GroupLayout& l, const Tensor& weight, const Tensor& bias, double eps,
                        RowStats* stats) {
    const Tensor rows = reshape(x, {static_cast<long>(l.n), static_cast<long>(l.groups), -1});
    const Tensor mu = mean(rows, {2}, true), variance = var(rows, {2}, false, true);
    if (stats != nullptr) *stats = {mu.value(), variance.value()};
    std::vector<long> shape;
    for (std::size_t d : x.shape()) shape.push_back(static_cast<long>(d));
    Tensor y = reshape((rows - mu) / sqrt(variance + eps), shape);
    if (weight.defined()) y = y * reshape(weight, channel_shape(x));
    if (bias.defined()) y = y + reshape(bias, channel_shape(x));
    return y;
}

void check_instance_norm(const char* op, const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                         bool use_input_stats) {
    if (!x.defined()) fail(op, "input must be a defined tensor");
    const Shape sx = x.shape();
    if (sx.size() < 3) fail(op, fmt::format("expects an input (N, C, *) with at least one spatial axis, got {}", shape_str(sx)));
    check_channel_param(op, "running_mean", running_mean, sx);
    check_channel_param(op, "running_var", running_var, sx);
    std::size_t spatial = 1;
    for (std::size_t a = 2; a < sx.size(); ++a) spatial *= sx[a];
    if (use_input_stats && spatial <= 1) {
        fail(op, fmt::format("Expected more than 1 spatial element when training, got input of shape {}", shape_str(sx)));
    }
    if (!use_input_stats && (!running_mean.defined() || !running_var.defined())) {
        fail(op, fmt::format("use_input_stats = false needs running_mean and running_var (input {})", shape_str(sx)));
    }
}

// running = (1 - momentum) running + momentum * (the batch's average over N of each instance's
// mean, resp. unbiased variance), as PyTorch's instance_norm.
void update_instance_running(Tensor& running_mean, Tensor& running_var, const RowStats& s, const GroupLayout& l,
                             double momentum) {
    const double unbias = static_cast<double>(l.spatial) / static_cast<double>(l.spatial - 1);
    for (std::size_t c = 0; c < l.channels; ++c) {
        double m = 0.0, v = 0.0;
        for (std::size_t n = 0; n < l.n; ++n) {
            m += s.mean.data()[n * l.channels + c];
            v += s.var.data()[n * l.channels + c] * unbias;
        }
        const double count = static_cast<double>(l.n);
        if (running_mean.defined()) running_mean.mutable_value()(c) = (1.0 - momentum) * running_mean.value()(c) + momentum * m / count;
        if (running_var.defined()) running_var.mutable_value()(c) = (1.0 - momentum) * running_var.value()(c) + momentum * v / count;
    }
}

Tensor instance_norm_impl(const char* op, bool composed, const Tensor& x, Tensor running_mean, Tensor running_var,
                          const Tensor& weight, const Tensor& bias, bool use_input_stats, double momentum, double eps) {
    check_instance_norm(op, x, running_mean, running_var, use_input_stats);
    const GroupLayout l = check_group_norm(op, x, static_cast<std::int64_t>(x.size(1)), weight, bias);
    // With the running statistics the normalisation is per channel: BatchNorm in evaluation mode.
    if (!use_input_stats) return (composed ? batch_norm_composed : batch_norm)(x, running_mean, running_var, weight, bias, false, momentum, eps);
    RowStats stats;
    Tensor y = composed ? group_norm_graph(x, l, weight, bias, eps, &stats)
                        : group_norm_node("instance_norm", x, l, weight, bias, eps, &stats);
    update_instance_running(running_mean, running_var, stats, l, momentum);
    return y;
}

}  // namespace

Tensor group_norm(const Tensor& x, std::int64_t num_groups, const Tensor& weight, const Tensor& bias, double eps) {
    const GroupLayout l = check_group_norm("group_norm", x, num_groups, weight, bias);
    return group_norm_node("group_norm", x, l, weight, bias, eps);
}

Tensor group_norm_composed(const Tensor& x, std::int64_t num_groups, const Tensor& weight, const Tensor& bias,
                           double eps) {
    const GroupLayout l = check_group_norm("group_norm_composed", x, num_groups, weight, bias);
    return group_norm_graph(x, l, weight, bias, eps);
}

Tensor instance_norm(const Tensor& x, Tensor running_mean, Tensor running_var, const Tensor& weight, const Tensor& bias,
                     bool use_input_stats, double momentum, double eps) {
    return instance_norm_impl("instance_norm", false, x, running_mean, running_var, weight, bias, use_input_stats, momentum, eps);
}

Tensor instance_norm_composed(const Tensor& x, Tensor running_mean, Tensor running_var, const Tensor& weight,
                              const Tensor& bias, bool use_input_stats, double momentum, double eps) {
    return instance_norm_impl("instance_norm_composed", true, x, running_mean, running_var, weight, bias, use_input_stats,
                              momentum, eps);
}

}  // namespace xg::nn::functional
