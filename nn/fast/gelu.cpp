// GELU's fast kernels. The loops vectorise, erfc, exp and tanh included (nn/fast/simd_math.hpp:
// glibc's vector math library); every element goes through the same vector code, so the bits do
// not depend on the thread count.
#include "nn/fast/gelu.hpp"

#include <cmath>

#include "core/fast/parallel.hpp"
#include "nn/fast/kernel_primitives.hpp"
#include "nn/fast/simd_math.hpp"

namespace xg::nn::fast {

namespace {

using detail::simd_erfc;
using detail::simd_exp;
using detail::simd_map;
using detail::simd_tanh;

constexpr double kInvSqrt2 = 0.70710678118654752440;     // 1/sqrt(2)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1/sqrt(2 pi)
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2/pi)
constexpr double kKappa = 0.044715;

// y = x Phi(x), Phi written with erfc so the left tail keeps its tiny relative precision:
// 0.5 * (1 + erf(z)) rounds to exactly 0 for x < -8.3, erfc does not.
XG_KERNEL_CLONES void gelu_exact_forward(const double* x, double* y, std::size_t n) {
    simd_map(n, y, [](double x_i) { return x_i * (0.5 * simd_erfc(-x_i * kInvSqrt2)); }, x);
}

// dx = g (Phi(x) + x phi(x)), with Phi(x) = y / x from the forward output y = x Phi(x): a
// division instead of a second erfc, within 2 ulp of Phi. Near 0 (where y / x would lose bits
// or divide by zero) Phi = 0.5 to double precision.
XG_KERNEL_CLONES void gelu_exact_backward(const double* x, const double* y, const double* g, double* dx, std::size_t n) {
    simd_map(n, dx, [](double x_i, double y_i, double g_i) {
        const double cdf = std::fabs(x_i) > 1e-17 ? y_i / x_i : 0.5;
        return g_i * (cdf + x_i * kInvSqrt2Pi * simd_exp(-0.5 * x_i * x_i));
    }, x, y, g);
}

// y = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + kappa x^3)
XG_KERNEL_CLONES void gelu_tanh_forward(const double* x, double* y, std::size_t n) {
    simd_map(n, y, [](double x_i) {
        const double t = simd_tanh(kSqrt2OverPi * (x_i + kKappa * x_i * x_i * x_i));
        return 0.5 * x_i * (1.0 + t);
    }, x);
}

// dx = g (0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 kappa x^2)), t = tanh(u)
XG_KERNEL_CLONES void gelu_tanh_backward(const double* x, const double* g, double* dx, std::size_t n) {
    simd_map(n, dx, [](double x_i, double g_i) {
        const double t = simd_tanh(kSqrt2OverPi * (x_i + kKappa * x_i * x_i * x_i));
        return g_i * (0.5 * (1.0 + t) + 0.5 * x_i * (1.0 - t * t) * kSqrt2OverPi * (1.0 + 3.0 * kKappa * x_i * x_i));
    }, x, g);
}

// The float32 kernels: the same formulas in float arithmetic, 8 floats per AVX2 vector, with
// glibc's float erfcf, expf, tanhf (docs/precision.md, "GELU in float32"; their rounding bound:
// tests/gelu/test_gelu_tiers.cpp). The constants are the float roundings of the ones above.
constexpr float kInvSqrt2f = static_cast<float>(kInvSqrt2);
constexpr float kInvSqrt2Pif = static_cast<float>(kInvSqrt2Pi);
constexpr float kSqrt2OverPif = static_cast<float>(kSqrt2OverPi);
constexpr float kKappaf = static_cast<float>(kKappa);
// Below 2^-26, Phi(x) = 0.5 + x phi(0) is 0.5 within a fifth of a float rounding, and y / x could
// lose bits to a subnormal y.
constexpr float kPhiByDivisionFrom = 0x1p-26f;

// y = x Phi(x), Phi(x) = erfc(-x / sqrt 2) / 2
XG_KERNEL_CLONES void gelu_exact_forward(const float* x, float* y, std::size_t n) {
    simd_map(n, y, [](float x_i) { return x_i * (0.5f * simd_erfc(-x_i * kInvSqrt2f)); }, x);
}

// dx = g (Phi(x) + x phi(x)), Phi = y / x from the forward
XG_KERNEL_CLONES void gelu_exact_backward(const float* x, const float* y, const float* g, float* dx, std::size_t n) {
    simd_map(n, dx, [](float x_i, float y_i, float g_i) {
        const float cdf = std::fabs(x_i) > kPhiByDivisionFrom ? y_i / x_i : 0.5f;
        return g_i * (cdf + x_i * kInvSqrt2Pif * simd_exp(-0.5f * x_i * x_i));
    }, x, y, g);
}

// y = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + kappa x^3)
XG_KERNEL_CLONES void gelu_tanh_forward(const float* x, float* y, std::size_t n) {
    simd_map(n, y, [](float x_i) {
        const float t = simd_tanh(kSqrt2OverPif * (x_i + kKappaf * x_i * x_i * x_i));
        return 0.5f * x_i * (1.0f + t);
    }, x);
}

// dx = g (0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 kappa x^2)), t = tanh(u)
XG_KERNEL_CLONES void gelu_tanh_backward(const float* x, const float* g, float* dx, std::size_t n) {
    simd_map(n, dx, [](float x_i, float g_i) {
        const float t = simd_tanh(kSqrt2OverPif * (x_i + kKappaf * x_i * x_i * x_i));
        return g_i * (0.5f * (1.0f + t) + 0.5f * x_i * (1.0f - t * t) * kSqrt2OverPif * (1.0f + 3.0f * kKappaf * x_i * x_i));
    }, x, g);
}

template <class T>
void forward_block(const T* x, T* y, std::size_t n, bool exact) {
    if (exact) {
        gelu_exact_forward(x, y, n);
    } else {
        gelu_tanh_forward(x, y, n);
    }
}

template <class T>
void backward_block(const T* x, const T* y, const T* g, T* dx, std::size_t n, bool exact) {
    if (exact) {
        gelu_exact_backward(x, y, g, dx, n);
    } else {
        gelu_tanh_backward(x, g, dx, n);
    }
}

}  // namespace

template <class T>
void gelu_forward(const T* x, T* y, std::size_t n, functional::GeluApproximate approximate) {
    const bool exact = approximate == functional::GeluApproximate::none;
    xg::detail::parallel_for(n, 1, [=](std::size_t begin, std::size_t end) { forward_block(x + begin, y + begin, end - begin, exact); });
}

// The exact backward reads Phi = y / x from the forward's output: in float32 that y carries the
// float forward's error, which tests/gelu/test_gelu_tiers.cpp bounds.
template <class T>
void gelu_backward(const T* x, const T* y, const T* dy, T* dx, std::size_t n, functional::GeluApproximate approximate) {
    const bool exact = approximate == functional::GeluApproximate::none;
    xg::detail::parallel_for(n, 1, [=](std::size_t begin, std::size_t end) {
        backward_block(x + begin, exact ? y + begin : nullptr, dy + begin, dx + begin, end - begin, exact);
    });
}

template void gelu_forward<double>(const double*, double*, std::size_t, functional::GeluApproximate);
template void gelu_forward<float>(const float*, float*, std::size_t, functional::GeluApproximate);
template void gelu_backward<double>(const double*, const double*, const double*, double*, std::size_t,
                                    functional::GeluApproximate);
template void gelu_backward<float>(const float*, const float*, const float*, float*, std::size_t,
                                   functional::GeluApproximate);

}  // namespace xg::nn::fast
