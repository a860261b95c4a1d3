// GELU's fast kernels: the reference kernels' signatures (nn/reference/gelu.hpp), with glibc's
// vector math (nn/fast/simd_math.hpp), AVX2 clones and the elements shared between threads. The
// float32 ones compute in float (glibc's erfcf, expf, tanhf), 8 floats per AVX2 vector.
// Tested against the reference: tests/gelu/test_gelu_tiers.cpp.
#pragma once

#include <cstddef>


namespace xg::nn::fast {

#include "nn/reference/gelu_signatures.inc"  // the signatures, shared by both tiers

}  // namespace xg::nn::fast
