// DyT as one graph node: y = w * tanh(alpha * x) + b over contiguous rows of the
// D = prod(normalized_shape) trailing elements. Derivation: docs/derivations/dyt.md; the kernels:
// nn/reference/dyt.cpp and nn/fast/dyt.cpp, chosen per call by xg::kernel_tier().
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "core/ops/composed_backward.hpp"
#include "nn/functional/dyt.hpp"
#include "nn/fast/dyt.hpp"
#include "nn/functional/affine.hpp"
#include "nn/functional/row_layout.hpp"
#include "nn/functional/tier.hpp"
#include "nn/reference/dyt.hpp"

namespace xg::nn::functional {

namespace {

detail::RowLayout check_dyt(const char* op, const Tensor& x, const Shape& normalized_shape, const Tensor& alpha,
                            const Tensor& weight, const Tensor& bias) {
    const detail::RowLayout l = detail::check_rows(op, x, normalized_shape, {{"weight", &weight}, {"bias", &bias}});
    if (!alpha.defined()) fail(op, fmt::format("alpha must be a defined tensor of one element (input {})", shape_str(x.shape())));
    if (alpha.numel() != 1 || alpha.shape().size() > 1) {
        fail(op, fmt::format("alpha must be a single number of shape (1,) or (), got shape {} (input {})",
                             shape_str(alpha.shape()), shape_str(x.shape())));
    }
    return l;
}

}  // namespace

namespace {

// One node for both storage types: T = float when x, alpha, weight and bias are all float32 (the
// kernels read and write their float32 storage: no float64 mirror); T = double otherwise.
template <class T>
Tensor dyt_node(const Tensor& x, const Shape& normalized_shape, const Tensor& alpha, const Tensor& weight, const Tensor& bias,
                const detail::RowLayout& l) {
    const detail::BasicValuesOr<T> w(weight, l.width, 1.0), b(bias, l.width, 0.0);
    const xt::xarray<T>& xv = detail::kernel_values<T>(x);
    xt::xarray<T> y = xt::xarray<T>::from_shape(xv.shape());
    detail::by_tier(reference::dyt_forward<T>, fast::dyt_forward<T>, xv.data(), double(detail::kernel_values<T>(alpha).data()[0]),
                    w.data(), b.data(), y.data(), l.rows, l.width);

    const detail::AffineSlots affine(weight, bias, 2);  // inputs: x, alpha, then the affine
    // dx = g w a (1 - t^2), t = tanh(a x); dalpha = sum g w x (1 - t^2); dw = sum over rows g t; db = sum over rows g
    return record(
        "dyt", std::move(y), affine.inputs({x, alpha}, weight, bias),
        [l, affine](const GradContext& c) -> Grads {
            const detail::BasicValuesOr<T> w(affine.weight_values<T>(c), l.width, 1.0);
            Array dw = xt::zeros<double>({l.width}), db = xt::zeros<double>({l.width});  // double sums: docs/precision.md
            xt::xarray<T> dx;
            if (c.needs_grad(0)) dx = xt::xarray<T>::from_shape(c.input_shape(0));
            double dalpha = 0.0;
            detail::by_tier(reference::dyt_backward<T>, fast::dyt_backward<T>, detail::kernel_input<T>(c, 0).data(),
                            detail::kernel_grad<T>(c).data(), double(detail::kernel_input<T>(c, 1).data()[0]), w.data(),
                            c.needs_grad(0) ? dx.data() : nullptr, dalpha, dw.data(), db.data(), l.rows, l.width);
            Grads g(c.num_inputs());
            if (c.needs_grad(0)) g[0] = std::move(dx);
            if (c.needs_grad(1)) {
                xt::xarray<T> da = xt::xarray<T>::from_shape(c.input_shape(1));
                da.data()[0] = T(dalpha);
                g[1] = std::move(da);
            }
            affine.put_grads(c, g, detail::stored_as<T>(std::move(dw)), detail::stored_as<T>(std::move(db)));
            return g;
        },
        {}, through_composed([normalized_shape, affine](const std::vector<Tensor>& in) {  // create_graph: the composed twin
            return dyt_composed(in[0], normalized_shape, in[1], affine.weight(in), affine.bias(in));
        }));
}

}  // namespace

Tensor dyt(const Tensor& x, const Shape& normalized_shape, const Tensor& alpha, const Tensor& weight, const Tensor& bias) {
    const detail::RowLayout l = check_dyt("dyt", x, normalized_shape, alpha, weight, bias);
    return detail::on_common_storage(x, {&alpha, &weight, &bias}, [&](auto storage) {
        return dyt_node<typename decltype(storage)::type>(x, normalized_shape, alpha, weight, bias, l);
    });
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
