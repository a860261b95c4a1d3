// RMSNorm as one graph node: y = x * rrms * w, rrms = 1/sqrt(mean(x^2) + eps) over each row of
// the D = prod(normalized_shape) trailing elements. The kernels: nn/reference/rms_norm.cpp (the
// formulas of docs/derivations/rmsnorm.md as plain loops) and nn/fast/rms_norm.cpp (tested against it).
#include <vector>

#include "core/ops/composed_backward.hpp"
#include "nn/fast/rms_norm.hpp"
#include "nn/functional/affine.hpp"
#include "nn/functional/functional.hpp"
#include "nn/functional/row_layout.hpp"
#include "nn/functional/tier.hpp"
#include "nn/reference/rms_norm.hpp"

namespace xg::nn::functional {

namespace {

detail::RowLayout check_rms_norm(const char* op, const Tensor& x, const Shape& normalized_shape, const Tensor& weight) {
    return detail::check_rows(op, x, normalized_shape, {{"weight", &weight}});
}

// One node for every storage type: T = x's storage type when weight shares its dtype (the kernels
// read and write that storage, recorded native, so no float64 mirror of any tensor is made);
// T = double otherwise (float64, or mixed dtypes read as float64 values).
template <class T>
Tensor rms_norm_node(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, double eps,
                     const detail::RowLayout& l) {
    const detail::BasicValuesOr<T> w(weight, l.width, 1.0);
    const xt::xarray<T>& xv = detail::kernel_values<T>(x);
    xt::xarray<T> y = xt::xarray<T>::from_shape(xv.shape());
    Array rrms = Array::from_shape({l.rows});
    detail::by_tier(reference::rms_norm_forward<T>, fast::rms_norm_forward<T>, xv.data(), w.data(), y.data(), rrms.data(), l.rows,
                    l.width, eps);

    const detail::AffineSlots affine(weight, Tensor());
    std::vector<SavedInfo> saved{{"rrms", {l.rows}}};
    // dx = rrms (dxhat - xhat mean(dxhat xhat)), dxhat = g w; dw = sum over rows of g xhat
    return record(
        "rms_norm", std::move(y), affine.inputs(x, weight, Tensor()),
        [l, affine, rrms = std::move(rrms)](const GradContext& c) -> Grads {
            const detail::BasicValuesOr<T> w(affine.weight_values<T>(c), l.width, 1.0);
            const xt::xarray<T>& xv = detail::kernel_input<T>(c, 0);
            Array dw = xt::zeros<double>({l.width});  // a double sum: docs/precision.md, "Accumulators"
            xt::xarray<T> dx;
            if (c.needs_grad(0)) dx = xt::xarray<T>::from_shape(xv.shape());
            detail::by_tier(reference::rms_norm_backward<T>, fast::rms_norm_backward<T>, xv.data(),
                            detail::kernel_grad<T>(c).data(), w.data(), rrms.data(), c.needs_grad(0) ? dx.data() : nullptr,
                            dw.data(), l.rows, l.width);
            Grads g(c.num_inputs());
            if (c.needs_grad(0)) g[0] = std::move(dx);
            affine.put_grads(c, g, detail::stored_as<T>(std::move(dw)), xt::xarray<T>());
            return g;
        },
        std::move(saved),
        // create_graph: the double backward differentiates the composed twin (docs/derivatives.md)
        through_composed([normalized_shape, affine, eps](const std::vector<Tensor>& in) {
            return rms_norm_composed(in[0], normalized_shape, affine.weight(in), eps);
        }));
}

}  // namespace

Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, double eps) {
    const detail::RowLayout l = check_rms_norm("rms_norm", x, normalized_shape, weight);
    return detail::on_common_storage(x, {&weight}, [&](auto storage) {
        return rms_norm_node<typename decltype(storage)::type>(x, normalized_shape, weight, eps, l);
    });
}

Tensor rms_norm_composed(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, double eps) {
    check_rms_norm("rms_norm_composed", x, normalized_shape, weight);
    Axes axes;
    for (int a = -static_cast<int>(normalized_shape.size()); a < 0; ++a) axes.push_back(a);
    Tensor y = x / sqrt(mean(x * x, axes, true) + eps);
    return weight.defined() ? y * weight : y;
}

}  // namespace xg::nn::functional
