// The vector machinery the fast kernels of core/ (core/fast/softmax.cpp) and nn/ (nn/fast/) share:
// AVX2 clones of a kernel, and glibc's vector math functions under names a `#pragma omp simd` loop
// vectorises (why and how: nn/fast/simd_math.hpp, which wraps them for nn/).
#pragma once

#include <cmath>

// A kernel marked XG_KERNEL_CLONES is compiled twice, for baseline x86-64 (SSE2) and for AVX2,
// and the dynamic loader picks one per machine (GCC function multi-versioning, an ifunc).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(XGRAD_NO_KERNEL_CLONES)
#define XG_KERNEL_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define XG_KERNEL_CLONES
#endif
// For the loops a clone calls (nn/fast/kernel_primitives.hpp): GCC does not inline a large default-target
// function into an AVX2 clone by itself, and an out-of-line copy runs with SSE2 only.
#if defined(__GNUC__)
#define XG_KERNEL_INLINE inline __attribute__((always_inline))
#else
#define XG_KERNEL_INLINE inline
#endif

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

/// exp(x) that a `#pragma omp simd` loop computes 2 (SSE2) or 4 (AVX2) at a time: glibc's vector
/// exp, within its documented 4 ulp (measured 2.86: tests/gelu/test_gelu_simd_math.cpp); elsewhere std::exp.
#if defined(XG_SIMD_MATH_LIBMVEC)
inline double vector_exp(double x) { return xg_libmvec_exp(x); }
#else
inline double vector_exp(double x) { return std::exp(x); }
#endif

}  // namespace xg::detail
