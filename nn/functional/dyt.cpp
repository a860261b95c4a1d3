// DyT as one graph node: y = w * tanh(alpha * x) + b, one pass over contiguous rows of the
// D = prod(normalized_shape) trailing elements. No row statistics, so no row sums in the forward;
// the backward has one sum over every element (for d alpha). Derivation: docs/derivations/dyt.md.
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "core/engine/composed_backward.hpp"
#include "nn/modules/dyt.hpp"
#include "nn/fast/kernel_primitives.hpp"
#include "nn/functional/row_layout.hpp"

namespace xg::nn::functional {

namespace {

using detail::RowLayout;

RowLayout check_dyt(const char* op, const Tensor& x, const Shape& normalized_shape, const Tensor& alpha, const Tensor& weight,
                    const Tensor& bias) {
    const RowLayout l = detail::check_rows(op, x, normalized_shape, {{"weight", &weight}, {"bias", &bias}});
    if (!alpha.defined()) fail(op, fmt::format("alpha must be a defined tensor of one element (input {})", shape_str(x.shape())));
    if (alpha.numel() != 1 || alpha.shape().size() > 1) {
        fail(op, fmt::format("alpha must be a single number of shape (1,) or (), got shape {} (input {})",
                             shape_str(alpha.shape()), shape_str(x.shape())));
    }
    return l;
}

void dyt_forward(const double* x, double a, const double* w, const double* b, double* y, const RowLayout& l) {
    const std::size_t n = l.width;
    for (std::size_t r = 0; r < l.rows; ++r) {
        const double* xr = x + r * n;
        double* yr = y + r * n;
        for (std::size_t j = 0; j < n; ++j) yr[j] = w[j] * std::tanh(a * xr[j]) + b[j];
    }
}

// With t = tanh(a x) recomputed and s = 1 - t^2 = dt/d(a x): dx = g w a s, and over every row
// d alpha += sum g w x s, dw += g t, db += g. Recomputing t costs one tanh per element; keeping
// it would hold a second input-sized array alive from forward to backward.
void dyt_backward(const double* x, const double* g, double a, const double* w, double* dx, double& dalpha, double* dw, double* db,
                  const RowLayout& l) {
    const std::size_t n = l.width;
    dalpha = 0.0;
    for (std::size_t r = 0; r < l.rows; ++r) {
        const double* xr = x + r * n;
        const double* gr = g + r * n;
        double* dxr = dx == nullptr ? nullptr : dx + r * n;
        dalpha += detail::row_sum(n, [=](std::size_t j) {
            const double t = std::tanh(a * xr[j]);
            const double dt = gr[j] * w[j] * (1.0 - t * t);  // dL/d(a x_j)
            if (dxr != nullptr) dxr[j] = dt * a;
            dw[j] += gr[j] * t;
            db[j] += gr[j];
            return dt * xr[j];
        });
    }
}

}  // namespace

Tensor dyt(const Tensor& x, const Shape& normalized_shape, const Tensor& alpha, const Tensor& weight, const Tensor& bias) {
    const RowLayout l = check_dyt("dyt", x, normalized_shape, alpha, weight, bias);
    const std::vector<double> ones(weight.defined() ? 0 : l.width, 1.0), zeros(bias.defined() ? 0 : l.width, 0.0);
    Array y = empty_like(x.value());
    dyt_forward(x.data(), alpha.data()[0], weight.defined() ? weight.data() : ones.data(),
                bias.defined() ? bias.data() : zeros.data(), y.data(), l);

    std::vector<Tensor> inputs{x, alpha};
    const int wi = weight.defined() ? static_cast<int>(inputs.size()) : -1;
    if (weight.defined()) inputs.push_back(weight);
    const int bi = bias.defined() ? static_cast<int>(inputs.size()) : -1;
    if (bias.defined()) inputs.push_back(bias);
    // dx = g w a (1 - t^2), t = tanh(a x); dalpha = sum g w x (1 - t^2); dw = sum over rows g t; db = sum over rows g
    return record("dyt", std::move(y), std::move(inputs), [l, wi, bi](const GradContext& c) -> Grads {
        Grads g(c.num_inputs());
        const std::vector<double> ones(wi < 0 ? l.width : 0, 1.0);
        const double* w = wi < 0 ? ones.data() : c.input(static_cast<std::size_t>(wi)).data();
        Array dw = xt::zeros<double>({l.width}), db = xt::zeros<double>({l.width});
        Array dx;
        if (c.needs_grad(0)) dx = empty_like(c.input(0));
        double dalpha = 0.0;
        dyt_backward(c.input(0).data(), c.grad.data(), c.input(1).data()[0], w, c.needs_grad(0) ? dx.data() : nullptr, dalpha,
                     dw.data(), db.data(), l);
        if (c.needs_grad(0)) g[0] = std::move(dx);
        if (c.needs_grad(1)) {
            Array da = Array::from_shape(c.input_shape(1));
            da.data()[0] = dalpha;
            g[1] = std::move(da);
        }
        if (wi >= 0 && c.needs_grad(static_cast<std::size_t>(wi))) {
            dw.reshape(c.input_shape(static_cast<std::size_t>(wi)));
            g[static_cast<std::size_t>(wi)] = std::move(dw);
        }
        if (bi >= 0 && c.needs_grad(static_cast<std::size_t>(bi))) {
            db.reshape(c.input_shape(static_cast<std::size_t>(bi)));
            g[static_cast<std::size_t>(bi)] = std::move(db);
        }
        return g;
    }, {}, through_composed([normalized_shape, wi, bi](const std::vector<Tensor>& in) {  // create_graph: the composed twin
        return dyt_composed(in[0], normalized_shape, in[1], wi < 0 ? Tensor() : in[static_cast<std::size_t>(wi)],
                            bi < 0 ? Tensor() : in[static_cast<std::size_t>(bi)]);
    }));
}

Tensor dyt_composed(const Tensor& x, const Shape& normalized_shape, const Tensor& alpha, const Tensor& weight,
                    const Tensor& bias) {
    check_dyt("dyt_composed", x, normalized_shape, alpha, weight, bias);
    // A 0-D alpha broadcasts as it is; a (1,) alpha broadcasts against x's last axis.
    Tensor y = tanh(x * alpha);
    if (weight.defined()) y = y * weight;
    if (bias.defined()) y = y + bias;
    return y;
}

}  // namespace xg::nn::functional
