// LayerNorm as one graph node. A "row" is the D = prod(normalized_shape) trailing elements
// normalised jointly; rows are contiguous. The kernels: nn/reference/layer_norm.cpp (the formulas
// of docs/derivations/layernorm.md as plain loops) and nn/fast/layer_norm.cpp (tested against it).
#include <vector>

#include "core/ops/composed_backward.hpp"
#include "nn/fast/layer_norm.hpp"
#include "nn/functional/affine.hpp"
#include "nn/functional/functional.hpp"
#include "nn/functional/row_layout.hpp"
#include "nn/functional/tier.hpp"
#include "nn/reference/layer_norm.hpp"

namespace xg::nn::functional {

namespace {

detail::RowLayout check_layer_norm(const char* op, const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                                   const Tensor& bias) {
    return detail::check_rows(op, x, normalized_shape, {{"weight", &weight}, {"bias", &bias}});
}

// One node for every storage type: T = x's storage type when weight and bias share its dtype (the
// kernels read and write that storage, recorded native, so no float64 mirror of any tensor is
// made); T = double otherwise (float64, or mixed dtypes read as float64 values).
template <class T>
Tensor layer_norm_node(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias, double eps,
                       const detail::RowLayout& l) {
    const detail::BasicValuesOr<T> w(weight, l.width, 1.0), b(bias, l.width, 0.0);
    const xt::xarray<T>& xv = detail::kernel_values<T>(x);
    xt::xarray<T> y = xt::xarray<T>::from_shape(xv.shape());
    Array mean = Array::from_shape({l.rows}), rstd = Array::from_shape({l.rows});
    detail::by_tier(reference::layer_norm_forward<T>, fast::layer_norm_forward<T>, xv.data(), w.data(), b.data(), y.data(),
                    mean.data(), rstd.data(), l.rows, l.width, eps);

    const detail::AffineSlots affine(weight, bias);
    std::vector<SavedInfo> saved{{"mean", {l.rows}}, {"rstd", {l.rows}}};
    // dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)), dxhat = g w; dw = sum g xhat; db = sum g
    return record(
        "layer_norm", std::move(y), affine.inputs(x, weight, bias),
        [l, affine, mean = std::move(mean), rstd = std::move(rstd)](const GradContext& c) -> Grads {
            const detail::BasicValuesOr<T> w(affine.weight_values<T>(c), l.width, 1.0);
            const xt::xarray<T>& xv = detail::kernel_input<T>(c, 0);
            Array dw = xt::zeros<double>({l.width}), db = xt::zeros<double>({l.width});  // double sums: docs/precision.md
            xt::xarray<T> dx;
            if (c.needs_grad(0)) dx = xt::xarray<T>::from_shape(xv.shape());
            detail::by_tier(reference::layer_norm_backward<T>, fast::layer_norm_backward<T>, xv.data(),
                            detail::kernel_grad<T>(c).data(), w.data(), mean.data(), rstd.data(),
                            c.needs_grad(0) ? dx.data() : nullptr, dw.data(), db.data(), l.rows, l.width);
            Grads g(c.num_inputs());
            if (c.needs_grad(0)) g[0] = std::move(dx);
            affine.put_grads(c, g, detail::stored_as<T>(std::move(dw)), detail::stored_as<T>(std::move(db)));
            return g;
        },
        std::move(saved),
        // create_graph: the double backward differentiates the composed twin (docs/derivatives.md)
        through_composed([normalized_shape, affine, eps](const std::vector<Tensor>& in) {
            return layer_norm_composed(in[0], normalized_shape, affine.weight(in), affine.bias(in), eps);
        }));
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias, double eps) {
    const detail::RowLayout l = check_layer_norm("layer_norm", x, normalized_shape, weight, bias);
    return detail::on_common_storage(x, {&weight, &bias}, [&](auto storage) {
        return layer_norm_node<typename decltype(storage)::type>(x, normalized_shape, weight, bias, eps, l);
    });
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
