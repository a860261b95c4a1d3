#include "core/ops/linear_map.hpp"

#include "core/ops/ops.hpp"

namespace xg {

namespace {

Array gather_flat(const FlatGather& m, const Array& in) {
    Array out = Array::from_shape(m.out_shape);
    const double* pi = in.data();
    for (std::size_t i = 0; i < m.offsets.size(); ++i) {
        out.data()[i] = m.offsets[i] == FlatGather::kNoSource ? 0.0 : pi[m.offsets[i]];
    }
    return out;
}

Array scatter_flat(const FlatGather& m, const Array& out) {
    Array in = xt::zeros<double>(m.in_shape);
    const double* po = out.data();
    for (std::size_t i = 0; i < m.offsets.size(); ++i) {
        if (m.offsets[i] != FlatGather::kNoSource) in.data()[m.offsets[i]] += po[i];
    }
    return in;
}

Tensor apply(const Tensor& x, const std::shared_ptr<const FlatGather>& m, bool adjoint);

// d gather/dx = scatter of the gradient, d scatter/dx = gather of it: each differentiates into the other
Tensor apply(const Tensor& x, const std::shared_ptr<const FlatGather>& m, bool adjoint) {
    Array value = adjoint ? scatter_flat(*m, x.value()) : gather_flat(*m, x.value());
    return record(
        adjoint ? m->op + "_backward" : m->op, std::move(value), {x},
        [m, adjoint](const BackwardContext& c) -> std::vector<Tensor> { return {apply(c.grad, m, !adjoint)}; });
}

}  // namespace

Tensor scatter_in_graph(const Tensor& g, std::shared_ptr<const FlatGather> map) { return apply(g, map, true); }

Backward scaled_in_graph(std::shared_ptr<const Array> factors) {
    return [factors = std::move(factors)](const BackwardContext& c) -> std::vector<Tensor> {
        return {mul(c.grad, Tensor(*factors, c.grad.dtype()))};  // the factors in the gradient's dtype: a float64 constant would promote it
    };
}

}  // namespace xg
