// Self-attention's fast kernels: the reference kernels' signatures (nn/reference/attention.hpp), as
// BLAS products on the packed rows in place (leading dimension 3E, no copy of a head) and core's
// fast softmax over all heads' rows at once. The heads are shared between threads, one BLAS call per
// product, so no bit depends on the thread count. Tested against the reference: ctest -L tiers.
#pragma once

#include <cstddef>

namespace xg::nn::fast {

template <class T>
double self_attention_forward(const T* qkv, T* P, T* out, std::size_t B, std::size_t L, std::size_t H, std::size_t D,
                              double scale, bool causal);
template <class T>
void self_attention_backward(const T* qkv, const T* P, const T* g, T* dqkv, std::size_t B, std::size_t L, std::size_t H,
                             std::size_t D, double scale);

extern template double self_attention_forward<double>(const double*, double*, double*, std::size_t, std::size_t, std::size_t,
                                                      std::size_t, double, bool);
extern template double self_attention_forward<float>(const float*, float*, float*, std::size_t, std::size_t, std::size_t,
                                                     std::size_t, double, bool);
extern template void self_attention_backward<double>(const double*, const double*, const double*, double*, std::size_t,
                                                     std::size_t, std::size_t, std::size_t, double);
extern template void self_attention_backward<float>(const float*, const float*, const float*, float*, std::size_t,
                                                    std::size_t, std::size_t, std::size_t, double);

}  // namespace xg::nn::fast
