// The vector machinery the fast kernels of core/ (core/fast/softmax.cpp) and nn/ (nn/fast/) share:
// AVX2 clones of a kernel, and glibc's vector math functions under names a `#pragma omp simd` loop
// vectorises (why and how: the top of nn/fast/simd_math.hpp, which adds simd_map for nn/).
#pragma once

#include <cmath>

#include "core/fast/kernel_clones.hpp"  // XG_KERNEL_CLONES, XG_KERNEL_INLINE

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__) && \
    (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35)) && !defined(XGRAD_NO_LIBMVEC)
#define XG_SIMD_MATH_LIBMVEC 1
extern "C" {
__attribute__((simd("notinbranch"), const)) double xg_libmvec_erfc(double) noexcept __asm__("erfc");
__attribute__((simd("notinbranch"), const)) double xg_libmvec_exp(double) noexcept __asm__("exp");
__attribute__((simd("notinbranch"), const)) double xg_libmvec_tanh(double) noexcept __asm__("tanh");
// The float ones: 4 floats per SSE call, 8 per AVX2 call (_ZGVbN4v_erfcf, _ZGVdN8v_erfcf, ...).
__attribute__((simd("notinbranch"), const)) float xg_libmvec_erfcf(float) noexcept __asm__("erfcf");
__attribute__((simd("notinbranch"), const)) float xg_libmvec_expf(float) noexcept __asm__("expf");
__attribute__((simd("notinbranch"), const)) float xg_libmvec_tanhf(float) noexcept __asm__("tanhf");
}
#endif

namespace xg::detail {

// erfc, exp and tanh (double and float) that a `#pragma omp simd` loop computes 2 or 4 doubles (4 or
// 8 floats) at a time, SSE2 or AVX2: glibc's vector versions, within its documented 4 ulp
// (measured: tests/gelu/test_gelu_simd_math.cpp); elsewhere the scalar std:: functions.
#if defined(XG_SIMD_MATH_LIBMVEC)
inline double simd_erfc(double x) { return xg_libmvec_erfc(x); }
inline double simd_exp(double x) { return xg_libmvec_exp(x); }
inline double simd_tanh(double x) { return xg_libmvec_tanh(x); }
inline float simd_erfc(float x) { return xg_libmvec_erfcf(x); }
inline float simd_exp(float x) { return xg_libmvec_expf(x); }
inline float simd_tanh(float x) { return xg_libmvec_tanhf(x); }
#else
inline double simd_erfc(double x) { return std::erfc(x); }
inline double simd_exp(double x) { return std::exp(x); }
inline double simd_tanh(double x) { return std::tanh(x); }
inline float simd_erfc(float x) { return std::erfc(x); }
inline float simd_exp(float x) { return std::exp(x); }
inline float simd_tanh(float x) { return std::tanh(x); }
#endif

}  // namespace xg::detail
