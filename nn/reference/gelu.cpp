// GELU, exact and tanh-approximated: docs/derivations/gelu.md, one loop per formula.
#include "nn/reference/gelu.hpp"

#include <cmath>

#include "core/engine/dtype.hpp"

namespace xg::nn::reference {

namespace {

constexpr double kInvSqrt2 = 0.70710678118654752440;     // 1/sqrt(2)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1/sqrt(2 pi)
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2/pi)
constexpr double kKappa = 0.044715;

// Phi(x) = 0.5 (1 + erf(x / sqrt 2)), written with erfc so that the left tail keeps its digits
// (1 + erf rounds to 0 below x = -8.3).
double Phi(double x) { return 0.5 * std::erfc(-x * kInvSqrt2); }

// phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
double phi(double x) { return kInvSqrt2Pi * std::exp(-0.5 * x * x); }

// u = sqrt(2/pi) (x + kappa x^3)
double u(double x) { return kSqrt2OverPi * (x + kKappa * x * x * x); }

}  // namespace

template <class T>
void gelu_forward(const T* x, T* y, std::size_t n, bool exact) {
    if (exact) {
        for (std::size_t k = 0; k < n; ++k) {
            const double xk = x[k];
            y[k] = static_cast<T>(xk * Phi(xk));  // y = x Phi(x)
        }
    } else {
        for (std::size_t k = 0; k < n; ++k) {
            const double xk = x[k];
            y[k] = static_cast<T>(0.5 * xk * (1.0 + std::tanh(u(xk))));  // y = 0.5 x (1 + tanh(u))
        }
    }
}

template <class T>
void gelu_backward(const T* x, const T* /*y*/, const T* dy, T* dx, std::size_t n, bool exact) {
    if (exact) {
        for (std::size_t k = 0; k < n; ++k) {
            const double xk = x[k];
            dx[k] = static_cast<T>(dy[k] * (Phi(xk) + xk * phi(xk)));  // dx = dy (Phi + x phi)
        }
    } else {
        for (std::size_t k = 0; k < n; ++k) {
            // dx = dy (0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 kappa x^2)), t = tanh(u)
            const double xk = x[k], t = std::tanh(u(xk));
            dx[k] = static_cast<T>(dy[k] * (0.5 * (1.0 + t) + 0.5 * xk * (1.0 - t * t) * kSqrt2OverPi * (1.0 + 3.0 * kKappa * xk * xk)));
        }
    }
}

XG_FOR_EACH_STORAGE_TYPE(XG_GELU_KERNELS)

}  // namespace xg::nn::reference
