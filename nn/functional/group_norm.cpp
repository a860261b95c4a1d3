// GroupNorm as one graph node, and InstanceNorm (GroupNorm with one channel per group) on the
// same kernels. x is (N, C, *); a row is one sample's group: C/G channels of S = prod(*) values,
// D = (C/G) S elements, contiguous. Statistics per row as LayerNorm's; the affine is per channel.
// The kernels: nn/reference/group_norm.cpp (the formulas of docs/derivations/groupnorm.md as plain
// loops) and nn/fast/group_norm.cpp (tested against it).
#include <vector>

#include <fmt/format.h>

#include "core/ops/composed_backward.hpp"
#include "nn/fast/group_norm.hpp"
#include "nn/functional/affine.hpp"
#include "nn/functional/functional.hpp"
#include "nn/functional/running_stats.hpp"
#include "nn/functional/tier.hpp"
#include "nn/reference/group_norm.hpp"

namespace xg::nn::functional {

namespace {

struct GroupLayout {
    std::size_t n = 0, channels = 0, groups = 1, spatial = 1;  // N, C, G, S
    std::size_t rows() const { return n * groups; }
    std::size_t channels_per_group() const { return channels / groups; }
    std::size_t width() const { return channels_per_group() * spatial; }  // D
};

GroupLayout check_group_norm(const char* op, const Tensor& x, std::int64_t num_groups, const Tensor& weight,
                             const Tensor& bias) {
    if (!x.defined()) fail(op, "input must be a defined tensor");
    const Shape sx = x.shape();
    if (sx.size() < 2) fail(op, fmt::format("expects an input (N, C, *), got {}", shape_str(sx)));
    if (num_groups <= 0 || sx[1] % static_cast<std::size_t>(num_groups) != 0) {
        fail(op, fmt::format("the {} channels of input {} must split into num_groups = {} equal groups", sx[1], shape_str(sx),
                             num_groups));
    }
    detail::check_per_channel(op, "weight", weight, sx);
    detail::check_per_channel(op, "bias", bias, sx);
    GroupLayout l{sx[0], sx[1], static_cast<std::size_t>(num_groups), 1};
    for (std::size_t a = 2; a < sx.size(); ++a) l.spatial *= sx[a];
    if (l.width() == 0) fail(op, fmt::format("cannot normalise empty groups (input {})", shape_str(sx)));
    return l;
}

struct RowStats {
    Array mean, var;
};

Tensor group_norm_graph(const Tensor& x, const GroupLayout& l, const Tensor& weight, const Tensor& bias, double eps,
                        RowStats* stats = nullptr);

// The group_norm node (op "group_norm", or "instance_norm" with one channel per group); the row
// statistics come back for InstanceNorm's running estimates. One node for both storage types:
// T = float when x, weight and bias are all float32 (the kernels read and write their float32
// storage: no float64 mirror), T = double otherwise.
template <class T>
Tensor group_norm_node(const char* op, const Tensor& x, const GroupLayout& l, const Tensor& weight, const Tensor& bias,
                       double eps, RowStats* stats) {
    const detail::BasicValuesOr<T> w(weight, l.channels, 1.0), b(bias, l.channels, 0.0);
    const xt::xarray<T>& xv = detail::kernel_values<T>(x);
    xt::xarray<T> y = xt::xarray<T>::from_shape(xv.shape());
    Array mean = Array::from_shape({l.rows()}), rstd = Array::from_shape({l.rows()}), var = Array::from_shape({l.rows()});
    detail::by_tier(reference::group_norm_forward<T>, fast::group_norm_forward<T>, xv.data(), w.data(), b.data(), y.data(),
                    mean.data(), rstd.data(), var.data(), l.n, l.channels, l.groups, l.spatial, eps);
    if (stats != nullptr) *stats = {mean, var};

    const detail::AffineSlots affine(weight, bias);
    std::vector<SavedInfo> saved{{"mean", {l.rows()}}, {"rstd", {l.rows()}}};
    // dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)) per row, dxhat = g w_c; dw_c = sum g xhat; db_c = sum g
    return record(
        op, std::move(y), affine.inputs(x, weight, bias),
        [l, affine, mean = std::move(mean), rstd = std::move(rstd)](const GradContext& c) -> Grads {
            const detail::BasicValuesOr<T> w(affine.weight_values<T>(c), l.channels, 1.0);
            Array dw = xt::zeros<double>({l.channels}), db = xt::zeros<double>({l.channels});  // double sums: docs/precision.md
            xt::xarray<T> dx;
            if (c.needs_grad(0)) dx = xt::xarray<T>::from_shape(c.input_shape(0));
            detail::by_tier(reference::group_norm_backward<T>, fast::group_norm_backward<T>, detail::kernel_input<T>(c, 0).data(),
                            detail::kernel_grad<T>(c).data(), w.data(), mean.data(), rstd.data(),
                            c.needs_grad(0) ? dx.data() : nullptr, dw.data(), db.data(), l.n, l.channels, l.groups, l.spatial);
            Grads g(c.num_inputs());
            if (c.needs_grad(0)) g[0] = std::move(dx);
            affine.put_grads(c, g, detail::stored_as<T>(std::move(dw)), detail::stored_as<T>(std::move(db)));
            return g;
        },
        std::move(saved),
        // create_graph: the double backward differentiates the composed twin (docs/derivatives.md)
        through_composed([l, affine, eps](const std::vector<Tensor>& in) {
            return group_norm_graph(in[0], l, affine.weight(in), affine.bias(in), eps);
        }));
}

Tensor group_norm_node(const char* op, const Tensor& x, const GroupLayout& l, const Tensor& weight, const Tensor& bias,
                       double eps, RowStats* stats = nullptr) {
    return detail::on_common_storage(x, {&weight, &bias}, [&](auto storage) {
        return group_norm_node<typename decltype(storage)::type>(op, x, l, weight, bias, eps, stats);
    });
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
    if (stats != nullptr) *stats = {detail::float64_values(mu), detail::float64_values(variance)};
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
    detail::check_per_channel(op, "running_mean", running_mean, sx);
    detail::check_per_channel(op, "running_var", running_var, sx);
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
    const double count = static_cast<double>(l.n);
    const auto batch_average = [&](const Array& per_row, double factor) {
        return [&, factor](std::size_t c) {
            double sum = 0.0;
            for (std::size_t n = 0; n < l.n; ++n) sum += per_row.data()[n * l.channels + c] * factor;
            return momentum * sum / count;
        };
    };
    detail::update_running_statistic(running_mean, momentum, batch_average(s.mean, 1.0));
    detail::update_running_statistic(running_var, momentum, batch_average(s.var, unbias));
}

Tensor instance_norm_impl(const char* op, bool composed, const Tensor& x, Tensor running_mean, Tensor running_var,
                          const Tensor& weight, const Tensor& bias, bool use_input_stats, double momentum, double eps) {
    check_instance_norm(op, x, running_mean, running_var, use_input_stats);
    const GroupLayout l = check_group_norm(op, x, static_cast<std::int64_t>(x.size(1)), weight, bias);
    // With the running statistics the normalisation is per channel: BatchNorm in evaluation mode.
    if (!use_input_stats)
        return (composed ? batch_norm_composed : batch_norm)(x, running_mean, running_var, weight, bias, false, momentum, eps);
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
