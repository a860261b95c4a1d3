// Inverted dropout as one graph node: the mask drawn in forward is the backward's factor.
#include <memory>

#include <fmt/format.h>

#include "core/fast/strided.hpp"
#include "nn/functional/functional.hpp"

namespace xg::nn::functional {

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen) {
    if (!(p >= 0.0 && p <= 1.0)) fail("dropout", fmt::format("probability p must be in [0, 1], got {}", p));
    if (!training || p == 0.0) return x;
    const Shape shape = x.shape();
    Array mask = Array::from_shape(shape);  // 0 or 1/(1-p) per element
    if (p == 1.0) {
        mask.fill(0.0);  // everything dropped, nothing drawn: PyTorch's x * 0 (and gradient 0)
    } else {
        const double keep_scale = 1.0 / (1.0 - p);
        for (double& m : mask) m = gen.uniform() < p ? 0.0 : keep_scale;
    }
    // y = x m and d dropout/dx = m: a product with the constant mask in the dtype of what it
    // multiplies (in float32 the factor 1/(1-p) is rounded, as PyTorch's), kept as a plain array: a
    // backward holds no Tensor
    auto factors = std::make_shared<const Array>(std::move(mask));
    return on_storage(x, [&](const auto& xs) {
        using T = typename std::decay_t<decltype(xs)>::value_type;
        xt::xarray<T> y = empty_storage<T>(shape);
        const T* px = xs.data();
        const double* pm = factors->data();
        for (std::size_t i = 0; i < y.size(); ++i) y.data()[i] = px[i] * static_cast<T>(pm[i]);  // as mul(x, m in T)
        return record("dropout", std::move(y), {x}, [factors](const BackwardContext& c) -> std::vector<Tensor> {
            return {mul(c.grad, Tensor(*factors, c.grad.dtype()))};
        }, {{"mask", shape}});
    });
}

}  // namespace xg::nn::functional
