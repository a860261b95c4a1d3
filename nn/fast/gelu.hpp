// GELU's fast kernels: the reference kernels' signatures (nn/reference/gelu.hpp), with glibc's
// vector math (nn/fast/simd_math.hpp), AVX2 clones and the elements shared between threads. The
// float32 ones compute in float (glibc's erfcf, expf, tanhf), 8 floats per AVX2 vector.
// Tested against the reference: tests/gelu/test_gelu_tiers.cpp.
#pragma once

#include <cstddef>


namespace xg::nn::fast {

template <class T>
void gelu_forward(const T* x, T* y, std::size_t n, bool exact);
template <class T>
void gelu_backward(const T* x, const T* y, const T* dy, T* dx, std::size_t n, bool exact);

extern template void gelu_forward<double>(const double*, double*, std::size_t, bool);
extern template void gelu_forward<float>(const float*, float*, std::size_t, bool);
extern template void gelu_backward<double>(const double*, const double*, const double*, double*, std::size_t, bool);
extern template void gelu_backward<float>(const float*, const float*, const float*, float*, std::size_t, bool);

}  // namespace xg::nn::fast
