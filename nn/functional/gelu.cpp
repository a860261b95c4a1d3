// GELU as one element-wise graph node, exact (erf) or PyTorch's tanh approximation. The kernels:
// nn/reference/gelu.cpp (the formulas of docs/derivations/gelu.md) and nn/fast/gelu.cpp (the same
// with glibc's vector math and threads), chosen per call by xg::kernel_tier().
#include "core/engine/composed_backward.hpp"
#include "nn/fast/gelu.hpp"
#include "nn/functional/functional.hpp"
#include "nn/functional/tier.hpp"
#include "nn/reference/gelu.hpp"

namespace xg::nn::functional {

namespace {

constexpr double kInvSqrt2 = 0.70710678118654752440;     // 1/sqrt(2)
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2/pi)
constexpr double kKappa = 0.044715;

// float32: the same kernels on the float32 storage (float64 arithmetic inside, one rounding per store)
Tensor gelu_float32(const Tensor& x, GeluApproximate approximate) {
    const bool exact = approximate == GeluApproximate::none;
    const FloatArray& xv = x.values<float>();
    FloatArray y = FloatArray::from_shape(xv.shape());
    detail::by_tier(reference::gelu_forward<float>, fast::gelu_forward<float>, xv.data(), y.data(), y.size(), approximate);
    return record(exact ? "gelu" : "gelu_tanh", std::move(y), {x}, [exact, approximate](const GradContext& c) -> Grads {
        const FloatArray& x = c.input32(0);
        FloatArray gx = FloatArray::from_shape(x.shape());
        detail::by_tier(reference::gelu_backward<float>, fast::gelu_backward<float>, x.data(),
                        exact ? c.output32().data() : nullptr, c.grad32().data(), gx.data(), x.size(), approximate);
        return {std::move(gx)};
    }, {}, through_composed([approximate](const std::vector<Tensor>& in) { return gelu_composed(in[0], approximate); }));
}

}  // namespace

Tensor gelu(const Tensor& x, GeluApproximate approximate) {
    if (!x.defined()) fail("gelu", "input must be a defined tensor");
    if (x.dtype() == kFloat32) return gelu_float32(x, approximate);
    const bool exact = approximate == GeluApproximate::none;
    Array y = empty_like(x.value());
    detail::by_tier(reference::gelu_forward<double>, fast::gelu_forward<double>, x.value().data(), y.data(), y.size(), approximate);
    // dx = dy * gelu'(x), gelu' = Phi(x) + x phi(x) (exact); the output goes along for the fast tier's Phi = y / x
    return record(exact ? "gelu" : "gelu_tanh", std::move(y), {x}, [exact, approximate](const GradContext& c) -> Grads {
        const Array& x = c.input(0);
        Array gx = empty_like(x);
        detail::by_tier(reference::gelu_backward<double>, fast::gelu_backward<double>, x.data(), exact ? c.output().data() : nullptr,
                        c.grad.data(), gx.data(), x.size(), approximate);
        return {std::move(gx)};
    }, {}, through_composed([approximate](const std::vector<Tensor>& in) { return gelu_composed(in[0], approximate); }));
}

Tensor gelu_composed(const Tensor& x, GeluApproximate approximate) {
    if (!x.defined()) fail("gelu_composed", "input must be a defined tensor");
    if (approximate == GeluApproximate::none) return x * 0.5 * (1.0 + erf(x * kInvSqrt2));
    return 0.5 * x * (1.0 + tanh(kSqrt2OverPi * (x + kKappa * pow(x, 3.0))));
}

}  // namespace xg::nn::functional
