// RMSNorm as one graph node: y = x * rrms * w, rrms = 1/sqrt(mean(x^2) + eps) over each row of
// the D = prod(normalized_shape) trailing elements. The kernels: nn/reference/rms_norm.cpp (the
// formulas of docs/derivations/rmsnorm.md as plain loops) and nn/fast/rms_norm.cpp (tested against it).
#include <vector>

#include "core/engine/composed_backward.hpp"
#include "nn/fast/rms_norm.hpp"
#include "nn/functional/affine.hpp"
#include "nn/functional/functional.hpp"
#include "nn/functional/row_layout.hpp"
#include "nn/functional/tier.hpp"
#include "nn/reference/rms_norm.hpp"

namespace xg::nn::functional {

namespace {

using detail::AffineSlots;
using detail::by_tier;
using detail::RowLayout;
using detail::ValuesOr;
using FloatValuesOr = detail::BasicValuesOr<float>;

RowLayout check_rms_norm(const char* op, const Tensor& x, const Shape& normalized_shape, const Tensor& weight) {
    return detail::check_rows(op, x, normalized_shape, {{"weight", &weight}});
}


// The float32 node (x and weight float32): the same kernels on the float32 storage, recorded
// native32, so neither the forward nor the backward makes a float64 mirror of any tensor.
Tensor rms_norm_float32(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, double eps, const RowLayout& l) {
    const FloatValuesOr w(weight, l.width, 1.0);
    const FloatArray& xv = x.values<float>();
    FloatArray y = FloatArray::from_shape(xv.shape());
    Array rrms = Array::from_shape({l.rows});
    by_tier(reference::rms_norm_forward<float>, fast::rms_norm_forward<float>, xv.data(), w.data(), y.data(), rrms.data(), l.rows,
            l.width, eps);

    const AffineSlots affine(weight, Tensor());
    std::vector<SavedInfo> saved{{"rrms", {l.rows}}};
    // dx = rrms (dxhat - xhat mean(dxhat xhat)), dxhat = g w; dw = sum over rows of g xhat
    return record(
        "rms_norm", std::move(y), affine.inputs(x, weight, Tensor()),
        [l, affine, rrms = std::move(rrms)](const GradContext& c) -> Grads {
            const FloatValuesOr w(affine.weight_values32(c), l.width, 1.0);
            const FloatArray& xv = c.input32(0);
            Array dw = xt::zeros<double>({l.width});  // a double sum: docs/precision.md, "Accumulators"
            FloatArray dx;
            if (c.needs_grad(0)) dx = FloatArray::from_shape(xv.shape());
            by_tier(reference::rms_norm_backward<float>, fast::rms_norm_backward<float>, xv.data(), c.grad32().data(), w.data(),
                    rrms.data(), c.needs_grad(0) ? dx.data() : nullptr, dw.data(), l.rows, l.width);
            Grads g(c.num_inputs());
            if (c.needs_grad(0)) g[0] = std::move(dx);
            affine.put_grads(c, g, to_float32_array(dw), FloatArray());
            return g;
        },
        std::move(saved),
        through_composed([normalized_shape, affine, eps](const std::vector<Tensor>& in) {
            return rms_norm_composed(in[0], normalized_shape, affine.weight(in), eps);
        }));
}

}  // namespace

Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, double eps) {
    const RowLayout l = check_rms_norm("rms_norm", x, normalized_shape, weight);
    if (detail::all_float32(x, {&weight})) return rms_norm_float32(x, normalized_shape, weight, eps, l);
    const ValuesOr w(weight, l.width, 1.0);
    Array y = empty_like(x.value());
    Array rrms = Array::from_shape({l.rows});
    by_tier(reference::rms_norm_forward<double>, fast::rms_norm_forward<double>, x.data(), w.data(), y.data(), rrms.data(), l.rows,
            l.width, eps);

    const AffineSlots affine(weight, Tensor());
    std::vector<SavedInfo> saved{{"rrms", {l.rows}}};
    // dx = rrms (dxhat - xhat mean(dxhat xhat)), dxhat = g w; dw = sum over rows of g xhat
    return record(
        "rms_norm", std::move(y), affine.inputs(x, weight, Tensor()),
        [l, affine, rrms = std::move(rrms)](const GradContext& c) -> Grads {
            const ValuesOr w(affine.weight_values(c), l.width, 1.0);
            Array dw = xt::zeros<double>({l.width}), dx;
            if (c.needs_grad(0)) dx = empty_like(c.input(0));
            by_tier(reference::rms_norm_backward<double>, fast::rms_norm_backward<double>, c.input(0).data(), c.grad.data(),
                    w.data(), rrms.data(), c.needs_grad(0) ? dx.data() : nullptr, dw.data(), l.rows, l.width);
            Grads g(c.num_inputs());
            if (c.needs_grad(0)) g[0] = std::move(dx);
            affine.put_grads(c, g, std::move(dw), Array());
            return g;
        },
        std::move(saved),
        // create_graph: the double backward differentiates the composed twin (docs/derivatives.md)
        through_composed([normalized_shape, affine, eps](const std::vector<Tensor>& in) {
            return rms_norm_composed(in[0], normalized_shape, affine.weight(in), eps);
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
