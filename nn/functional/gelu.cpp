// GELU as one element-wise graph node, exact (erf) or PyTorch's tanh approximation. The kernels:
// nn/reference/gelu.cpp (the formulas of docs/derivations/gelu.md) and nn/fast/gelu.cpp (the same
// with glibc's vector math and threads), chosen per call by xg::kernel_tier().
#include "core/ops/composed_backward.hpp"
#include "nn/fast/gelu.hpp"
#include "nn/functional/functional.hpp"
#include "nn/functional/kernel_storage.hpp"
#include "nn/functional/tier.hpp"
#include "nn/reference/gelu.hpp"

namespace xg::nn::functional {

namespace {

constexpr double kInvSqrt2 = 0.70710678118654752440;     // 1/sqrt(2)
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2/pi)
constexpr double kKappa = 0.044715;

// One node for both storage types: T = float for a float32 x (the kernels read and write its
// float32 storage, float64 arithmetic inside, one rounding per store), T = double otherwise.
template <class T>
Tensor gelu_node(const Tensor& x, GeluApproximate approximate) {
    const bool exact = approximate == GeluApproximate::none;
    const xt::xarray<T>& xv = detail::kernel_values<T>(x);
    xt::xarray<T> y = xt::xarray<T>::from_shape(xv.shape());
    detail::by_tier(reference::gelu_forward<T>, fast::gelu_forward<T>, xv.data(), y.data(), y.size(), exact);
    // dx = dy * gelu'(x), gelu' = Phi(x) + x phi(x) (exact); the output goes along for the fast tier's Phi = y / x
    return record(exact ? "gelu" : "gelu_tanh", std::move(y), {x}, [exact](const GradContext& c) -> Grads {
        const xt::xarray<T>& x = detail::kernel_input<T>(c, 0);
        xt::xarray<T> gx = xt::xarray<T>::from_shape(x.shape());
        detail::by_tier(reference::gelu_backward<T>, fast::gelu_backward<T>, x.data(),
                        exact ? detail::kernel_output<T>(c).data() : nullptr, detail::kernel_grad<T>(c).data(), gx.data(),
                        x.size(), exact);
        return grads_of(std::move(gx));
    }, {}, through_composed([approximate](const std::vector<Tensor>& in) { return gelu_composed(in[0], approximate); }));
}

}  // namespace

Tensor gelu(const Tensor& x, GeluApproximate approximate) {
    if (!x.defined()) fail("gelu", "input must be a defined tensor");
    return with_storage_type(x.dtype(), [&](auto storage) { return gelu_node<typename decltype(storage)::type>(x, approximate); });
}

Tensor gelu_composed(const Tensor& x, GeluApproximate approximate) {
    if (!x.defined()) fail("gelu_composed", "input must be a defined tensor");
    if (approximate == GeluApproximate::none) return x * 0.5 * (1.0 + erf(x * kInvSqrt2));
    return 0.5 * x * (1.0 + tanh(kSqrt2OverPi * (x + kKappa * pow(x, 3.0))));
}

}  // namespace xg::nn::functional
