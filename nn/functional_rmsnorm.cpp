// RMSNorm as one graph node: y = x * rrms * w, rrms = 1/sqrt(mean(x^2) + eps) over each row of
// the D = prod(normalized_shape) trailing elements. Derivation: docs/derivations/rmsnorm.md.
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
using detail::row_sum;

RowLayout check_rms_norm(const char* op, const Tensor& x, const Shape& normalized_shape, const Tensor& weight) {
    return detail::check_rows(op, x, normalized_shape, {{"weight", &weight}});
}

// All terms of mean(x^2) are non-negative, so one pass loses nothing to cancellation.
XG_KERNEL_CLONES void rms_norm_forward(const double* x, const double* w, double* y, double* rrms, const RowLayout& l, double eps) {
    const std::size_t n = l.width;
    const bool stream = detail::streams(y, l.rows * n, n);
    for (std::size_t r = 0; r < l.rows; ++r) {
        const double* xr = x + r * n;
        const double sum_sq = row_sum(n, [xr](std::size_t j, double& acc) { acc += xr[j] * xr[j]; });
        const double s = 1.0 / std::sqrt(sum_sq / static_cast<double>(n) + eps);
        rrms[r] = s;
        detail::store_rows<1>(y + r * n, n, n, stream, [=](std::size_t, std::size_t j) { return xr[j] * s * w[j]; });
    }
    if (stream) detail::store_fence();
}

// dx = rrms * (dxhat - xhat * mean(dxhat * xhat)), xhat = x rrms, dxhat = dy w; dw = sum dy xhat.
XG_KERNEL_CLONES void rms_norm_backward(const double* x, const double* g, const double* w, const double* rrms, double* dx, double* dw,
                       const RowLayout& l) {
    const std::size_t n = l.width;
    const double inv_n = 1.0 / static_cast<double>(n);
    const bool stream = dx != nullptr && detail::streams(dx, l.rows * n, n);
    for (std::size_t r = 0; r < l.rows; ++r) {
        const double* xr = x + r * n;
        const double* gr = g + r * n;
        const double s = rrms[r];
        const double sum_dxhat_xhat = row_sum(n, [=](std::size_t j, double& acc) {
            const double xhat = xr[j] * s;
            acc += gr[j] * w[j] * xhat;
            dw[j] += gr[j] * xhat;  // pass 1 also accumulates dw
        });
        if (dx == nullptr) continue;
        const double mean_dxhat_xhat = sum_dxhat_xhat * inv_n;
        detail::store_rows<1>(dx + r * n, n, n, stream,
                              [=](std::size_t, std::size_t j) { return s * (gr[j] * w[j] - xr[j] * s * mean_dxhat_xhat); });
    }
    if (stream) detail::store_fence();
}

}  // namespace

Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, double eps) {
    const RowLayout l = check_rms_norm("rms_norm", x, normalized_shape, weight);
    const std::vector<double> ones(weight.defined() ? 0 : l.width, 1.0);
    Array y = empty_like(x.value());
    Array rrms = Array::from_shape({l.rows});
    rms_norm_forward(x.data(), weight.defined() ? weight.data() : ones.data(), y.data(), rrms.data(), l, eps);

    std::vector<Tensor> inputs{x};
    if (weight.defined()) inputs.push_back(weight);
    std::vector<SavedInfo> saved{{"rrms", {l.rows}}};
    // dx = rrms (dxhat - xhat mean(dxhat xhat)), dxhat = dy w; dw = sum over rows of dy xhat
    return record(
        "rms_norm", std::move(y), std::move(inputs),
        [l, rrms = std::move(rrms)](const GradContext& c) -> Grads {
            Grads g(c.num_inputs());
            const bool affine = c.num_inputs() > 1;
            const std::vector<double> ones(affine ? 0 : l.width, 1.0);
            Array dw = xt::zeros<double>({l.width});
            Array dx;
            if (c.needs_grad(0)) dx = empty_like(c.input(0));
            rms_norm_backward(c.input(0).data(), c.grad.data(), affine ? c.input(1).data() : ones.data(), rrms.data(),
                              c.needs_grad(0) ? dx.data() : nullptr, dw.data(), l);
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
