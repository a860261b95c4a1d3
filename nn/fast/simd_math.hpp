// Internal to nn/: erfc, exp and tanh (double and float) that a `#pragma omp simd` loop vectorises.
//
// glibc (2.35 on) ships a vector math library, libmvec, with every libc6: erfc, exp and tanh of
// two (SSE) or four (AVX2) doubles at once, and erfcf, expf, tanhf of four or eight floats, within
// glibc's documented 4 ulp (measured by tests/gelu/test_gelu_simd_math.cpp, double against long
// double: erfc 1.98, exp 2.86, tanh 2.06, the scalar ones 0.5-3; float against double, AVX2:
// erfcf 1.57, expf 2.57, tanhf 1.02, and SSE 1.76, 2.80, 1.02). The declarations are glibc's
// own functions under a second name that carries GCC's `simd` attribute, which is what lets the
// vectoriser call the vector versions (_ZGVbN2v_erfc, _ZGVdN4v_erfc, ...) in a loop; math.h
// declares them that way only under -ffast-math, which xgrad never uses. libm.so brings libmvec
// in when a program links (`-lm`, which g++ adds), so nothing changes for a user's build.
// `const`: with -fno-math-errno (xgrad's flags) the only memory they may write is errno, which
// nothing reads; without it GCC would not vectorise a loop that also holds a select.
//
// Elsewhere (another compiler or C library) these are the scalar std:: functions.
//
// The declarations and the simd_erfc/exp/tanh wrappers are in core/fast/vector_math.hpp, which
// core/fast/softmax.cpp shares; this file adds simd_map for nn/.
//
// Results: the vector versions, the scalar function and the AVX2 and SSE versions round
// differently in about one call in a thousand (by an ulp). So that an element's result does not
// depend on where it sits (a thread's block, a loop's tail), simd_map sends every element through
// the same vector version. Between machines with and without AVX2 GELU's last bit can differ, as
// it could before through glibc's scalar exp (it has an FMA variant).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <utility>

#include "core/fast/vector_math.hpp"  // the libmvec declarations
#include "nn/fast/kernel_primitives.hpp"

namespace xg::nn::detail {

using xg::detail::simd_erfc;  // core/fast/vector_math.hpp
using xg::detail::simd_exp;
using xg::detail::simd_tanh;

// Elements per vector loop of simd_map: a whole number of vectors of 2 or 4 (SSE2, double or
// float) and 4 or 8 (AVX2), so the loop has no scalar remainder.
constexpr std::size_t kSimdBlock = 8;

template <class T, class F, class... In>
XG_KERNEL_INLINE void simd_block(T* out, F& value, const In*... in) {
#pragma omp simd
    for (std::size_t k = 0; k < kSimdBlock; ++k) out[k] = value(in[k]...);
}

template <class T, class F, std::size_t... J>
XG_KERNEL_INLINE void simd_tail(T* out, std::size_t count, F& value, const T* const (&in)[sizeof...(J)], std::index_sequence<J...>) {
    T padded[sizeof...(J)][kSimdBlock] = {};  // zeros past the end: a valid argument of every value() here
    for (std::size_t j = 0; j < sizeof...(J); ++j) std::copy(in[j], in[j] + count, padded[j]);
    T result[kSimdBlock];
    simd_block(result, value, static_cast<const T*>(padded[J])...);
    std::copy(result, result + count, out);
}

/// out[i] = value(in_1[i], ..., in_m[i]) for i < n, kSimdBlock elements at a time; the last
/// partial block goes through a zero-padded copy, so that every element is computed by the same
/// vector code wherever it sits (see the top of this file). T is double or float (all of out and in).
template <class T, class F, class... In>
XG_KERNEL_INLINE void simd_map(std::size_t n, T* out, F&& value, const In*... in) {
    std::size_t i = 0;
    for (; i + kSimdBlock <= n; i += kSimdBlock) simd_block(out + i, value, (in + i)...);
    if (i == n) return;
    const T* const rest[] = {(in + i)...};
    simd_tail(out + i, n - i, value, rest, std::index_sequence_for<In...>{});
}

}  // namespace xg::nn::detail
