// Inverted dropout as one graph node: the mask drawn in forward is the backward's factor.
#include <memory>

#include <fmt/format.h>

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
    // y = x m and d dropout/dx = m: a product with the constant mask, in the dtype of what it
    // multiplies (in float32 the factor 1/(1-p) is rounded, as PyTorch's), kept as a plain array:
    // a backward holds no Tensor
    auto factors = std::make_shared<const Array>(std::move(mask));
    const auto times_mask = [factors](const Tensor& t) { return mul(t, Tensor(*factors, t.dtype())); };
    Tensor y;
    {
        NoGradGuard values_only;
        y = times_mask(x);
    }
    return on_storage(y, [&](const auto& values) {
        return record("dropout", values, {x}, [times_mask](const BackwardContext& c) -> std::vector<Tensor> {
            return {times_mask(c.grad)};
        }, {{"mask", shape}});
    });
}

}  // namespace xg::nn::functional
