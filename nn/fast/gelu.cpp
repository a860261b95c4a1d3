// GELU's fast kernels. The loops vectorise, erfc, exp and tanh included (nn/fast/simd_math.hpp:
// glibc's vector math library); every element goes through the same vector code, so the bits do
// not depend on the thread count.
#include "nn/fast/gelu.hpp"

#include <algorithm>
#include <cmath>
#include <type_traits>

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

// The float32 kernels run the float64 ones above on blocks widened into stack buffers, so an
// element's float32 result is its float64 result rounded once (float32 storage, float64 arithmetic:
// docs/precision.md), whatever block or thread it falls in (simd_map computes every element alike).
constexpr std::size_t kWidenBlock = 512;  // 3 x 4 KiB of doubles: stays in L1

template <class Kernel>
void widened_blocks(std::size_t n, const float* const (&in)[3], std::size_t inputs, float* out, Kernel kernel) {
    double wide[3][kWidenBlock], result[kWidenBlock];
    for (std::size_t begin = 0; begin < n; begin += kWidenBlock) {
        const std::size_t count = std::min(kWidenBlock, n - begin);
        for (std::size_t j = 0; j < inputs; ++j) {
            for (std::size_t k = 0; k < count; ++k) wide[j][k] = in[j][begin + k];
        }
        kernel(wide[0], wide[1], wide[2], result, count);
        for (std::size_t k = 0; k < count; ++k) out[begin + k] = static_cast<float>(result[k]);
    }
}

void forward_block(const double* x, double* y, std::size_t n, bool exact) {
    if (exact) {
        gelu_exact_forward(x, y, n);
    } else {
        gelu_tanh_forward(x, y, n);
    }
}

void backward_block(const double* x, const double* y, const double* g, double* dx, std::size_t n, bool exact) {
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
    xg::detail::parallel_for(n, 1, [=](std::size_t begin, std::size_t end) {
        if constexpr (std::is_same_v<T, double>) {
            forward_block(x + begin, y + begin, end - begin, exact);
        } else {
            const float* const in[3] = {x + begin, nullptr, nullptr};
            widened_blocks(end - begin, in, 1, y + begin, [exact](const double* xw, const double*, const double*, double* yw,
                                                                 std::size_t count) { forward_block(xw, yw, count, exact); });
        }
    });
}

// The exact backward reads Phi = y / x from the forward's output: in float32 that y is rounded,
// which moves Phi by a relative u (tests/gelu/test_gelu_tiers.cpp bounds it).
template <class T>
void gelu_backward(const T* x, const T* y, const T* dy, T* dx, std::size_t n, functional::GeluApproximate approximate) {
    const bool exact = approximate == functional::GeluApproximate::none;
    xg::detail::parallel_for(n, 1, [=](std::size_t begin, std::size_t end) {
        if constexpr (std::is_same_v<T, double>) {
            backward_block(x + begin, exact ? y + begin : nullptr, dy + begin, dx + begin, end - begin, exact);
        } else {
            const float* const in[3] = {x + begin, dy + begin, exact ? y + begin : nullptr};
            widened_blocks(end - begin, in, exact ? 3 : 2, dx + begin,
                           [exact](const double* xw, const double* gw, const double* yw, double* dxw, std::size_t count) {
                               backward_block(xw, yw, gw, dxw, count, exact);
                           });
        }
    });
}

template void gelu_forward<double>(const double*, double*, std::size_t, functional::GeluApproximate);
template void gelu_forward<float>(const float*, float*, std::size_t, functional::GeluApproximate);
template void gelu_backward<double>(const double*, const double*, const double*, double*, std::size_t,
                                    functional::GeluApproximate);
template void gelu_backward<float>(const float*, const float*, const float*, float*, std::size_t,
                                   functional::GeluApproximate);

}  // namespace xg::nn::fast
