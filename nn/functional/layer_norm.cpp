// LayerNorm as one graph node: row kernels in the style of llm.c's layernorm_forward/backward.
// A "row" is the D = prod(normalized_shape) trailing elements normalised jointly; rows are
// contiguous. The kernels follow docs/derivations/layernorm.md line by line, with its symbols;
// the loops they are written with (sums, stores, clones) are in nn/fast/kernel_primitives.hpp.
#include <cmath>
#include <vector>

#include "core/engine/composed_backward.hpp"
#include "core/fast/parallel.hpp"
#include "nn/functional/functional.hpp"
#include "nn/fast/kernel_primitives.hpp"
#include "nn/functional/row_layout.hpp"

namespace xg::nn::functional {

namespace {

using detail::next_row;
using detail::OutputStore;
using detail::RowLayout;

RowLayout check_layer_norm(const char* op, const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                           const Tensor& bias) {
    return detail::check_rows(op, x, normalized_shape, {{"weight", &weight}, {"bias", &bias}});
}

// Per row r in [r0, r1): mean, var, rstd = 1 / sqrt(var + eps), xhat = (x - mean) rstd, y = xhat w + b.
XG_KERNEL_CLONES void layer_norm_forward(const double* x, const double* w, const double* b, double* y, double* row_mean,
                                         double* row_rstd, const RowLayout& l, double eps, std::size_t r0, std::size_t r1) {
    const std::size_t D = l.width;
    const OutputStore store(y, l.rows * D, D);
    for (std::size_t r = r0; r < r1; ++r) {
        const double* xr = x + r * D;
        double mean, var;
        detail::row_mean_var(xr, D, mean, var);
        const double rstd = 1.0 / std::sqrt(var + eps);
        row_mean[r] = mean;
        row_rstd[r] = rstd;
        const auto xhat = [=](std::size_t j) { return (xr[j] - mean) * rstd; };
        store(y + r * D, D, [=](std::size_t j) { return xhat(j) * w[j] + b[j]; });
    }
}

// Per row, with g = dL/dy and dxhat = g w:
//   dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat));  dw += g xhat, db += g.
// Pass 1 takes the two means (and dw, db), pass 2 writes dx; the row stays in L1/L2 between them,
// and pass 2 fetches the next row of x and g meanwhile (OutputStore: otherwise memory idles).
// Rows [r0, r1); dw and db are this range's partial sums.
XG_KERNEL_CLONES void layer_norm_backward(const double* x, const double* g, const double* w, const double* row_mean,
                                          const double* row_rstd, double* dx, double* dw, double* db, const RowLayout& l,
                                          std::size_t r0, std::size_t r1) {
    const std::size_t D = l.width;
    const double inv_D = 1.0 / static_cast<double>(D);
    const OutputStore store(dx, l.rows * D, D);
    for (std::size_t r = r0; r < r1; ++r) {
        const double *xr = x + r * D, *gr = g + r * D, mean = row_mean[r], rstd = row_rstd[r];
        const auto xhat = [=](std::size_t j) { return (xr[j] - mean) * rstd; };
        const auto dxhat = [=](std::size_t j) { return gr[j] * w[j]; };
        const auto [sum_dxhat, sum_dxhat_xhat] = detail::row_sums(D, [=](std::size_t j) {
            const double g_j = gr[j], xhat_j = xhat(j), dxhat_j = dxhat(j);  // read before dw, db are written
            dw[j] += g_j * xhat_j;
            db[j] += g_j;
            return std::pair{dxhat_j, dxhat_j * xhat_j};
        });
        if (dx == nullptr) continue;
        const double mean_dxhat = sum_dxhat * inv_D, mean_dxhat_xhat = sum_dxhat_xhat * inv_D;
        store(dx + r * D, D, [=](std::size_t j) { return rstd * (dxhat(j) - mean_dxhat - xhat(j) * mean_dxhat_xhat); },
              next_row(x, g, r, r1, D));
    }
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias, double eps) {
    const RowLayout l = check_layer_norm("layer_norm", x, normalized_shape, weight, bias);
    const std::vector<double> ones(weight.defined() ? 0 : l.width, 1.0), zeros(bias.defined() ? 0 : l.width, 0.0);
    Array y = empty_like(x.value());
    Array mean = Array::from_shape({l.rows}), rstd = Array::from_shape({l.rows});
    const double *w = weight.defined() ? weight.data() : ones.data(), *b = bias.defined() ? bias.data() : zeros.data();
    xg::detail::parallel_for(l.rows, l.width, [&](std::size_t r0, std::size_t r1) {
        layer_norm_forward(x.data(), w, b, y.data(), mean.data(), rstd.data(), l, eps, r0, r1);
    });

    std::vector<Tensor> inputs{x};
    const int wi = weight.defined() ? static_cast<int>(inputs.size()) : -1;
    if (weight.defined()) inputs.push_back(weight);
    const int bi = bias.defined() ? static_cast<int>(inputs.size()) : -1;
    if (bias.defined()) inputs.push_back(bias);
    std::vector<SavedInfo> saved{{"mean", {l.rows}}, {"rstd", {l.rows}}};
    // dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)), dxhat = g w; dw = sum g xhat; db = sum g
    return record(
        "layer_norm", std::move(y), std::move(inputs),
        [l, wi, bi, mean = std::move(mean), rstd = std::move(rstd)](const GradContext& c) -> Grads {
            Grads g(c.num_inputs());
            const std::vector<double> ones(wi < 0 ? l.width : 0, 1.0);
            const double* w = wi < 0 ? ones.data() : c.input(static_cast<std::size_t>(wi)).data();
            Array dw = xt::zeros<double>({l.width}), db = xt::zeros<double>({l.width});
            Array dx;
            if (c.needs_grad(0)) dx = empty_like(c.input(0));
            double* pdx = c.needs_grad(0) ? dx.data() : nullptr;
            xg::detail::sums_over_chunks(l.rows, l.width, l.width, dw.data(), db.data(),
                                     [&](std::size_t r0, std::size_t r1, double* dw_part, double* db_part) {
                layer_norm_backward(c.input(0).data(), c.grad.data(), w, mean.data(), rstd.data(), pdx, dw_part, db_part, l, r0, r1);
            });
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
