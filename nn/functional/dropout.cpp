// Inverted dropout as one graph node: the mask drawn in forward is the backward's factor.
#include <memory>

#include <fmt/format.h>

#include "nn/functional/functional.hpp"

namespace xg::nn::functional {

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen) {
    if (!(p >= 0.0 && p <= 1.0)) fail("dropout", fmt::format("probability p must be in [0, 1], got {}", p));
    if (!training || p == 0.0) return x;
    Array mask = Array::from_shape(x.value().shape());  // 0 or 1/(1-p) per element
    if (p == 1.0) {
        mask.fill(0.0);  // everything dropped, nothing drawn: PyTorch's x * 0 (and gradient 0)
    } else {
        const double keep_scale = 1.0 / (1.0 - p);
        for (double& m : mask) m = gen.uniform() < p ? 0.0 : keep_scale;
    }
    Array out = Array::from_shape(x.value().shape());
    const double* px = x.value().data();
    for (std::size_t i = 0; i < out.size(); ++i) out.data()[i] = px[i] * mask.data()[i];
    // d dropout/dx = mask (0 or 1/(1-p))
    const Shape saved_shape = x.shape();
    auto factors = std::make_shared<const Array>(std::move(mask));  // shared by both backwards
    return record("dropout", std::move(out), {x}, [factors](const GradContext& c) -> Grads {
        const Array& mask = *factors;
        Array g = Array::from_shape(c.grad.shape());
        for (std::size_t i = 0; i < g.size(); ++i) g.data()[i] = c.grad.data()[i] * mask.data()[i];
        return grads_of(std::move(g));
    }, {{"mask", saved_shape}}, [factors](const BackwardContext& c) -> std::vector<Tensor> {
        // create_graph: a product with the constant mask, in the gradient's dtype (a float64 mask would
        // turn a float32 gradient graph float64; in float32 the factor 1/(1-p) is rounded, as PyTorch's)
        return {mul(c.grad, Tensor(*factors, c.grad.dtype()))};
    });
}

}  // namespace xg::nn::functional
