// RMSNorm as one graph node: y = x * rrms * w, rrms = 1/sqrt(mean(x^2) + eps) over each row of
// the D = prod(normalized_shape) trailing elements. The kernels follow
// docs/derivations/rmsnorm.md with its symbols; their loops are in nn/fast/kernel_primitives.hpp.
#include <cmath>
#include <vector>

#include "core/engine/composed_backward.hpp"
#include "core/fast/parallel.hpp"
#include "nn/functional/functional.hpp"
#include "nn/fast/kernel_primitives.hpp"
#include "nn/functional/row_layout.hpp"

namespace xg::nn::functional {

namespace {

using detail::OutputStore;
using detail::RowLayout;

RowLayout check_rms_norm(const char* op, const Tensor& x, const Shape& normalized_shape, const Tensor& weight) {
    return detail::check_rows(op, x, normalized_shape, {{"weight", &weight}});
}

// Per row: rrms = 1 / sqrt(mean(x^2) + eps), xhat = x rrms, y = xhat w. All terms of mean(x^2)
// are non-negative, so one pass loses nothing to cancellation.
// Rows [r0, r1).
XG_KERNEL_CLONES void rms_norm_forward(const double* x, const double* w, double* y, double* row_rrms, const RowLayout& l,
                                       double eps, std::size_t r0, std::size_t r1) {
    const std::size_t D = l.width;
    const OutputStore store(y, l.rows * D, D);
    for (std::size_t r = r0; r < r1; ++r) {
        const double* xr = x + r * D;
        const double sum_x2 = detail::row_sum(D, [=](std::size_t j) { return xr[j] * xr[j]; });
        const double rrms = 1.0 / std::sqrt(sum_x2 / static_cast<double>(D) + eps);
        row_rrms[r] = rrms;
        const auto xhat = [=](std::size_t j) { return xr[j] * rrms; };
        store(y + r * D, D, [=](std::size_t j) { return xhat(j) * w[j]; });
    }
}

// Per row, with g = dL/dy and dxhat = g w:  dx = rrms (dxhat - xhat mean(dxhat xhat));  dw += g xhat.
// Rows [r0, r1); dw is this range's partial sum.
XG_KERNEL_CLONES void rms_norm_backward(const double* x, const double* g, const double* w, const double* row_rrms, double* dx,
                                        double* dw, const RowLayout& l, std::size_t r0, std::size_t r1) {
    const std::size_t D = l.width;
    const double inv_D = 1.0 / static_cast<double>(D);
    const OutputStore store(dx, l.rows * D, D);
    for (std::size_t r = r0; r < r1; ++r) {
        const double *xr = x + r * D, *gr = g + r * D, rrms = row_rrms[r];
        const auto xhat = [=](std::size_t j) { return xr[j] * rrms; };
        const auto dxhat = [=](std::size_t j) { return gr[j] * w[j]; };
        const double sum_dxhat_xhat = detail::row_sum(D, [=](std::size_t j) {
            const double g_j = gr[j], xhat_j = xhat(j), dxhat_j = dxhat(j);  // read before dw is written
            dw[j] += g_j * xhat_j;
            return dxhat_j * xhat_j;
        });
        if (dx == nullptr) continue;
        const double mean_dxhat_xhat = sum_dxhat_xhat * inv_D;
        store(dx + r * D, D, [=](std::size_t j) { return rrms * (dxhat(j) - xhat(j) * mean_dxhat_xhat); });
    }
}

}  // namespace

Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, double eps) {
    const RowLayout l = check_rms_norm("rms_norm", x, normalized_shape, weight);
    const std::vector<double> ones(weight.defined() ? 0 : l.width, 1.0);
    Array y = empty_like(x.value());
    Array rrms = Array::from_shape({l.rows});
    const double* w = weight.defined() ? weight.data() : ones.data();
    xg::detail::parallel_for(l.rows, l.width, [&](std::size_t r0, std::size_t r1) {
        rms_norm_forward(x.data(), w, y.data(), rrms.data(), l, eps, r0, r1);
    });

    std::vector<Tensor> inputs{x};
    if (weight.defined()) inputs.push_back(weight);
    std::vector<SavedInfo> saved{{"rrms", {l.rows}}};
    // dx = rrms (dxhat - xhat mean(dxhat xhat)), dxhat = g w; dw = sum over rows of g xhat
    return record(
        "rms_norm", std::move(y), std::move(inputs),
        [l, rrms = std::move(rrms)](const GradContext& c) -> Grads {
            Grads g(c.num_inputs());
            const bool affine = c.num_inputs() > 1;
            const std::vector<double> ones(affine ? 0 : l.width, 1.0);
            Array dw = xt::zeros<double>({l.width});
            Array dx;
            if (c.needs_grad(0)) dx = empty_like(c.input(0));
            const double* w = affine ? c.input(1).data() : ones.data();
            double* pdx = c.needs_grad(0) ? dx.data() : nullptr;
            xg::detail::sums_over_chunks(l.rows, l.width, l.width, dw.data(), nullptr,
                                     [&](std::size_t r0, std::size_t r1, double* dw_part, double*) {
                rms_norm_backward(c.input(0).data(), c.grad.data(), w, rrms.data(), pdx, dw_part, l, r0, r1);
            });
            if (c.needs_grad(0)) g[0] = std::move(dx);
            if (affine && c.needs_grad(1)) {
                dw.reshape(c.input_shape(1));
                g[1] = std::move(dw);
            }
            return g;
        },
        std::move(saved),
        // create_graph: the double backward differentiates the composed twin (docs/derivatives.md)
        through_composed([normalized_shape, eps](const std::vector<Tensor>& in) {
            return rms_norm_composed(in[0], normalized_shape, in.size() > 1 ? in[1] : Tensor(), eps);
        }));
}

Tensor rms_norm_composed(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, double eps) {
    check_rms_norm("rms_norm_composed", x, normalized_shape, weight);
    Axes axes;
    for (int a = -static_cast<int>(normalized_shape.size()); a < 0; ++a) axes.push_back(a);
    Tensor y = x / sqrt(mean(x * x, axes, true) + eps);
    return weight.defined() ? y * weight : y;
}

}  // namespace xg::nn::functional
