// LayerNorm as one graph node: row kernels in the style of llm.c's layernorm_forward/backward.
// A "row" is the D = prod(normalized_shape) trailing elements normalised jointly; rows are
// contiguous. Derivation of the backward and the choice of cached quantities:
// docs/derivations/layernorm.md.
#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "core/composed_backward.hpp"
#include "nn/functional.hpp"
#include "nn/row_kernels.hpp"

namespace xg::nn::functional {

namespace {

using detail::RowLayout;
using detail::row_stats;
using detail::row_sums;

RowLayout check_layer_norm(const char* op, const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                           const Tensor& bias) {
    return detail::check_rows(op, x, normalized_shape, {{"weight", &weight}, {"bias", &bias}});
}

XG_KERNEL_CLONES void layer_norm_forward(const double* x, const double* w, const double* b, double* y, double* mean, double* rstd,
                        const RowLayout& l, double eps) {
    const std::size_t n = l.width;
    const bool stream = detail::streams(y, l.rows * n, n);
    for (std::size_t r = 0; r < l.rows; ++r) {
        const double* xr = x + r * n;
        row_stats(xr, n, eps, mean[r], rstd[r]);
        const double m = mean[r], s = rstd[r];
        detail::store_rows<1>(y + r * n, n, n, stream, [=](std::size_t, std::size_t j) { return (xr[j] - m) * s * w[j] + b[j]; });
    }
    if (stream) detail::store_fence();
}

// Pass 1 per row: sums of dxhat and dxhat*xhat, accumulating dw and db. Pass 2 (only when dx is
// wanted): dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).
XG_KERNEL_CLONES void layer_norm_backward(const double* x, const double* g, const double* w, const double* mean, const double* rstd,
                         double* dx, double* dw, double* db, const RowLayout& l) {
    const std::size_t n = l.width;
    const double inv_n = 1.0 / static_cast<double>(n);
    const bool stream = dx != nullptr && detail::streams(dx, l.rows * n, n);
    for (std::size_t r = 0; r < l.rows; ++r) {
        const double* xr = x + r * n;
        const double* gr = g + r * n;
        const double m = mean[r], s = rstd[r];
        double sum_dxhat = 0.0, sum_dxhat_xhat = 0.0;
        row_sums(n, sum_dxhat, sum_dxhat_xhat, [=](std::size_t j, double& a, double& b) {
            const double xhat = (xr[j] - m) * s;
            const double dxhat = gr[j] * w[j];
            a += dxhat;
            b += dxhat * xhat;
            dw[j] += gr[j] * xhat;
            db[j] += gr[j];
        });
        if (dx == nullptr) continue;
        const double mean_dxhat = sum_dxhat * inv_n, mean_dxhat_xhat = sum_dxhat_xhat * inv_n;
        detail::store_rows<1>(dx + r * n, n, n, stream, [=](std::size_t, std::size_t j) {
            const double xhat = (xr[j] - m) * s;
            return s * (gr[j] * w[j] - mean_dxhat - xhat * mean_dxhat_xhat);
        });
    }
    if (stream) detail::store_fence();
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias, double eps) {
    const RowLayout l = check_layer_norm("layer_norm", x, normalized_shape, weight, bias);
    const std::vector<double> ones(weight.defined() ? 0 : l.width, 1.0), zeros(bias.defined() ? 0 : l.width, 0.0);
    Array y = empty_like(x.value());
    Array mean = Array::from_shape({l.rows}), rstd = Array::from_shape({l.rows});
    layer_norm_forward(x.data(), weight.defined() ? weight.data() : ones.data(), bias.defined() ? bias.data() : zeros.data(),
                       y.data(), mean.data(), rstd.data(), l, eps);

    std::vector<Tensor> inputs{x};
    const int wi = weight.defined() ? static_cast<int>(inputs.size()) : -1;
    if (weight.defined()) inputs.push_back(weight);
    const int bi = bias.defined() ? static_cast<int>(inputs.size()) : -1;
    if (bias.defined()) inputs.push_back(bias);
    std::vector<SavedInfo> saved{{"mean", {l.rows}}, {"rstd", {l.rows}}};
    // dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)), dxhat = dy w; dw = sum dy xhat; db = sum dy
    return record(
        "layer_norm", std::move(y), std::move(inputs),
        [l, wi, bi, mean = std::move(mean), rstd = std::move(rstd)](const GradContext& c) -> Grads {
            Grads g(c.num_inputs());
            const std::vector<double> ones(wi < 0 ? l.width : 0, 1.0);
            const double* w = wi < 0 ? ones.data() : c.input(static_cast<std::size_t>(wi)).data();
            Array dw = xt::zeros<double>({l.width}), db = xt::zeros<double>({l.width});
            Array dx;
            if (c.needs_grad(0)) dx = empty_like(c.input(0));
            layer_norm_backward(c.input(0).data(), c.grad.data(), w, mean.data(), rstd.data(),
                                c.needs_grad(0) ? dx.data() : nullptr, dw.data(), db.data(), l);
            if (c.needs_grad(0)) g[0] = std::move(dx);
            if (wi >= 0 && c.needs_grad(static_cast<std::size_t>(wi))) {
                dw.reshape(c.input_shape(static_cast<std::size_t>(wi)));
                g[static_cast<std::size_t>(wi)] = std::move(dw);
            }
            if (bi >= 0 && c.needs_grad(static_cast<std::size_t>(bi))) {
                db.reshape(c.input_shape(static_cast<std::size_t>(bi)));
                g[static_cast<std::size_t>(bi)] = std::move(db);
            }
            return g;
        },
        std::move(saved),
        // create_graph: the double backward differentiates the composed twin (docs/derivatives.md)
        through_composed([normalized_shape, wi, bi, eps](const std::vector<Tensor>& in) {
            return layer_norm_composed(in[0], normalized_shape, wi < 0 ? Tensor() : in[static_cast<std::size_t>(wi)],
                                       bi < 0 ? Tensor() : in[static_cast<std::size_t>(bi)], eps);
        }));
}

Tensor layer_norm_composed(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                           double eps) {
    check_layer_norm("layer_norm_composed", x, normalized_shape, weight, bias);
    Axes axes;
    for (int a = -static_cast<int>(normalized_shape.size()); a < 0; ++a) axes.push_back(a);
    const Tensor mu = mean(x, axes, true);
    const Tensor variance = var(x, axes, false, true);
    Tensor y = (x - mu) / sqrt(variance + eps);
    if (weight.defined()) y = y * weight;
    if (bias.defined()) y = y + bias;
    return y;
}

}  // namespace xg::nn::functional
