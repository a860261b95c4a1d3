// GELU's fast kernels. The loops vectorise, erfc, exp and tanh included (nn/fast/simd_math.hpp:
// glibc's vector math library); every element goes through the same vector code, so the bits do
// not depend on the thread count.
#include "nn/fast/gelu.hpp"

#include <cmath>
#include <type_traits>

#include "core/fast/parallel.hpp"
#include "nn/fast/kernel_primitives.hpp"
#include "nn/fast/simd_math.hpp"
#include "core/engine/dtype.hpp"

namespace xg::nn::fast {

namespace {

using detail::simd_erfc;
using detail::simd_exp;
using detail::simd_map;
using detail::simd_tanh;

// The constants in T (a float one is the float rounding of the double one).
template <class T> constexpr T kInvSqrt2 = T(0.70710678118654752440);     // 1/sqrt(2)
template <class T> constexpr T kInvSqrt2Pi = T(0.39894228040143267794);   // 1/sqrt(2 pi)
template <class T> constexpr T kSqrt2OverPi = T(0.79788456080286535588);  // sqrt(2/pi)
template <class T> constexpr T kKappa = T(0.044715);
// Below this |x|, Phi(x) = 0.5 + x phi(0) is 0.5 to T's precision (in float within a fifth of a
// rounding), and y / x would lose bits to a subnormal y or divide by zero.
template <class T> constexpr T kPhiByDivisionFrom = std::is_same_v<T, float> ? T(0x1p-26) : T(1e-17);

// Each formula once, in T: double for the float64 kernels, float for the float32 ones (8 floats
// per AVX2 vector with glibc's erfcf, expf, tanhf; docs/precision.md, "GELU in float32", and the
// rounding bound in tests/gelu/test_gelu_tiers.cpp). The clones below are one per T (GCC's
// target_clones takes no templates).

// y = x Phi(x), Phi written with erfc so the left tail keeps its tiny relative precision:
// 0.5 * (1 + erf(z)) rounds to exactly 0 for x < -8.3, erfc does not.
template <class T>
XG_KERNEL_INLINE void exact_forward(const T* x, T* y, std::size_t n) {
    simd_map(n, y, [](T x_i) { return x_i * (T(0.5) * simd_erfc(-x_i * kInvSqrt2<T>)); }, x);
}

// dx = g (Phi(x) + x phi(x)), with Phi(x) = y / x from the forward output y = x Phi(x): a
// division instead of a second erfc, within 2 ulp of Phi.
template <class T>
XG_KERNEL_INLINE void exact_backward(const T* x, const T* y, const T* g, T* dx, std::size_t n) {
    simd_map(n, dx, [](T x_i, T y_i, T g_i) {
        const T cdf = std::fabs(x_i) > kPhiByDivisionFrom<T> ? y_i / x_i : T(0.5);
        return g_i * (cdf + x_i * kInvSqrt2Pi<T> * simd_exp(T(-0.5) * x_i * x_i));
    }, x, y, g);
}

// y = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + kappa x^3)
template <class T>
XG_KERNEL_INLINE void tanh_forward(const T* x, T* y, std::size_t n) {
    simd_map(n, y, [](T x_i) {
        const T t = simd_tanh(kSqrt2OverPi<T> * (x_i + kKappa<T> * x_i * x_i * x_i));
        return T(0.5) * x_i * (T(1) + t);
    }, x);
}

// dx = g (0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 kappa x^2)), t = tanh(u)
template <class T>
XG_KERNEL_INLINE void tanh_backward(const T* x, const T* g, T* dx, std::size_t n) {
    simd_map(n, dx, [](T x_i, T g_i) {
        const T t = simd_tanh(kSqrt2OverPi<T> * (x_i + kKappa<T> * x_i * x_i * x_i));
        return g_i * (T(0.5) * (T(1) + t) +
                      T(0.5) * x_i * (T(1) - t * t) * kSqrt2OverPi<T> * (T(1) + T(3) * kKappa<T> * x_i * x_i));
    }, x, g);
}

XG_KERNEL_CLONES void gelu_exact_forward(const double* x, double* y, std::size_t n) { exact_forward(x, y, n); }
XG_KERNEL_CLONES void gelu_exact_forward(const float* x, float* y, std::size_t n) { exact_forward(x, y, n); }
XG_KERNEL_CLONES void gelu_exact_backward(const double* x, const double* y, const double* g, double* dx, std::size_t n) {
    exact_backward(x, y, g, dx, n);
}
XG_KERNEL_CLONES void gelu_exact_backward(const float* x, const float* y, const float* g, float* dx, std::size_t n) {
    exact_backward(x, y, g, dx, n);
}
XG_KERNEL_CLONES void gelu_tanh_forward(const double* x, double* y, std::size_t n) { tanh_forward(x, y, n); }
XG_KERNEL_CLONES void gelu_tanh_forward(const float* x, float* y, std::size_t n) { tanh_forward(x, y, n); }
XG_KERNEL_CLONES void gelu_tanh_backward(const double* x, const double* g, double* dx, std::size_t n) { tanh_backward(x, g, dx, n); }
XG_KERNEL_CLONES void gelu_tanh_backward(const float* x, const float* g, float* dx, std::size_t n) { tanh_backward(x, g, dx, n); }
// bfloat16 only stores: the float kernels on its values widened, each result rounded once.
void gelu_exact_forward(const bfloat16* x, bfloat16* y, std::size_t n) {
    detail::on_float_blocks(n, y, [](const float* xs, float* ys, std::size_t m) { gelu_exact_forward(xs, ys, m); }, x);
}
void gelu_exact_backward(const bfloat16* x, const bfloat16* y, const bfloat16* g, bfloat16* dx, std::size_t n) {
    detail::on_float_blocks(
        n, dx, [](const float* xs, const float* ys, const float* gs, float* dxs, std::size_t m) { gelu_exact_backward(xs, ys, gs, dxs, m); },
        x, y, g);
}
void gelu_tanh_forward(const bfloat16* x, bfloat16* y, std::size_t n) {
    detail::on_float_blocks(n, y, [](const float* xs, float* ys, std::size_t m) { gelu_tanh_forward(xs, ys, m); }, x);
}
void gelu_tanh_backward(const bfloat16* x, const bfloat16* g, bfloat16* dx, std::size_t n) {
    detail::on_float_blocks(n, dx, [](const float* xs, const float* gs, float* dxs, std::size_t m) { gelu_tanh_backward(xs, gs, dxs, m); }, x, g);
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
void gelu_forward(const T* x, T* y, std::size_t n, bool exact) {
    xg::detail::parallel_for(n, 1, [=](std::size_t begin, std::size_t end) { forward_block(x + begin, y + begin, end - begin, exact); });
}

// The exact backward reads Phi = y / x from the forward's output: in float32 that y carries the
// float forward's error, which tests/gelu/test_gelu_tiers.cpp bounds.
template <class T>
void gelu_backward(const T* x, const T* y, const T* dy, T* dx, std::size_t n, bool exact) {
    xg::detail::parallel_for(n, 1, [=](std::size_t begin, std::size_t end) {
        backward_block(x + begin, exact ? y + begin : nullptr, dy + begin, dx + begin, end - begin, exact);
    });
}

XG_FOR_EACH_STORAGE_TYPE(XG_GELU_KERNELS)

}  // namespace xg::nn::fast
