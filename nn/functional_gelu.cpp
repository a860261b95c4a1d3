// GELU as one element-wise graph node, exact (erf) or PyTorch's tanh approximation.
// Derivation of the backward: docs/derivations/gelu.md.
#include <cmath>

#include "core/composed_backward.hpp"
#include "core/parallel.hpp"
#include "nn/functional.hpp"

namespace xg::nn::functional {

namespace {

constexpr double kInvSqrt2 = 0.70710678118654752440;     // 1/sqrt(2)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1/sqrt(2 pi)
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2/pi)
constexpr double kKappa = 0.044715;

// Phi(x) written with erfc so the left tail keeps its tiny relative precision:
// 0.5 * (1 + erf(z)) rounds to exactly 0 for x < -8.3, erfc does not.
inline double normal_cdf(double x) { return 0.5 * std::erfc(-x * kInvSqrt2); }

inline double gelu_exact(double x) { return x * normal_cdf(x); }
// d/dx [x Phi(x)] = Phi(x) + x phi(x), with Phi(x) = y / x from the forward output y = x Phi(x):
// a division instead of a second erfc (2x slower than the exp), within 2 ulp of Phi. Near 0
// (where y / x would lose bits or divide by zero) Phi = 0.5 to double precision.
inline double gelu_exact_grad_from_output(double x, double y) {
    const double cdf = std::fabs(x) > 1e-17 ? y / x : 0.5;
    return cdf + x * kInvSqrt2Pi * std::exp(-0.5 * x * x);
}

inline double gelu_tanh(double x) { return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + kKappa * x * x * x))); }
// d/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 kappa x^2), t = tanh(sqrt(2/pi)(x + kappa x^3))
inline double gelu_tanh_grad(double x) {
    const double t = std::tanh(kSqrt2OverPi * (x + kKappa * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * kSqrt2OverPi * (1.0 + 3.0 * kKappa * x * x);
}

}  // namespace

Tensor gelu(const Tensor& x, GeluApproximate approximate) {
    if (!x.defined()) fail("gelu", "input must be a defined tensor");
    const bool exact = approximate == GeluApproximate::none;
    Array y = empty_like(x.value());
    const double* px = x.value().data();
    double* py = y.data();
    const std::size_t n = y.size();
    xg::detail::parallel_for(n, 1, [=](std::size_t begin, std::size_t end) {
        if (exact) {
            for (std::size_t i = begin; i < end; ++i) py[i] = gelu_exact(px[i]);
        } else {
            for (std::size_t i = begin; i < end; ++i) py[i] = gelu_tanh(px[i]);
        }
    });
    // dx = dy * gelu'(x), gelu' = Phi(x) + x phi(x); exact: Phi = y / x read back from the output
    return record(exact ? "gelu" : "gelu_tanh", std::move(y), {x}, [exact](const GradContext& c) -> Grads {
        const Array& x = c.input(0);
        Array gx = empty_like(x);
        const double *px = x.data(), *pg = c.grad.data();
        double* po = gx.data();
        const std::size_t n = x.size();
        const double* py = exact ? c.output().data() : nullptr;
        xg::detail::parallel_for(n, 1, [=](std::size_t begin, std::size_t end) {
            if (exact) {
                for (std::size_t i = begin; i < end; ++i) po[i] = pg[i] * gelu_exact_grad_from_output(px[i], py[i]);
            } else {
                for (std::size_t i = begin; i < end; ++i) po[i] = pg[i] * gelu_tanh_grad(px[i]);
            }
        });
        return {std::move(gx)};
    }, {}, through_composed([approximate](const std::vector<Tensor>& in) { return gelu_composed(in[0], approximate); }));
}

Tensor gelu_composed(const Tensor& x, GeluApproximate approximate) {
    if (!x.defined()) fail("gelu_composed", "input must be a defined tensor");
    if (approximate == GeluApproximate::none) return x * 0.5 * (1.0 + erf(x * kInvSqrt2));
    return 0.5 * x * (1.0 + tanh(kSqrt2OverPi * (x + kKappa * pow(x, 3.0))));
}

}  // namespace xg::nn::functional
