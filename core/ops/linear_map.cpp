#include "core/ops/linear_map.hpp"

#include "core/ops/ops.hpp"

namespace xg {

namespace {

// (in the input's storage T: moving elements computes nothing)
template <class T>
xt::xarray<T> gather_flat(const FlatGather& m, const xt::xarray<T>& in) {
    xt::xarray<T> out = xt::xarray<T>::from_shape(m.out_shape);
    const T* pi = in.data();
    for (std::size_t i = 0; i < m.offsets.size(); ++i) {
        out.data()[i] = m.offsets[i] == FlatGather::kNoSource ? T(0) : pi[m.offsets[i]];
    }
    return out;
}

// (summed in double: record() rounds the sums once into the gradient's dtype)
template <class T>
Array scatter_flat(const FlatGather& m, const xt::xarray<T>& out) {
    Array in = xt::zeros<double>(m.in_shape);
    const T* po = out.data();
    for (std::size_t i = 0; i < m.offsets.size(); ++i) {
        if (m.offsets[i] != FlatGather::kNoSource) in.data()[m.offsets[i]] += po[i];
    }
    return in;
}

Tensor apply(const Tensor& x, const std::shared_ptr<const FlatGather>& m, bool adjoint);

// d gather/dx = scatter of the gradient, d scatter/dx = gather of it: each differentiates into the other
Tensor apply(const Tensor& x, const std::shared_ptr<const FlatGather>& m, bool adjoint) {
    Backward backward = [m, adjoint](const BackwardContext& c) -> std::vector<Tensor> { return {apply(c.grad, m, !adjoint)}; };
    return on_storage(x, [&](const auto& values) {
        if (adjoint) return record(m->op + "_backward", scatter_flat(*m, values), {x}, std::move(backward));
        return record(m->op, gather_flat(*m, values), {x}, std::move(backward));
    });
}

}  // namespace

Tensor scatter_in_graph(const Tensor& g, std::shared_ptr<const FlatGather> map) { return apply(g, map, true); }

Backward scaled_in_graph(std::shared_ptr<const Array> factors) {
    return [factors = std::move(factors)](const BackwardContext& c) -> std::vector<Tensor> {
        return {mul(c.grad, Tensor(*factors, c.grad.dtype()))};  // the factors in the gradient's dtype: a float64 constant would promote it
    };
}

}  // namespace xg
