// Self-attention's fast kernels: the reference kernels' signatures (nn/reference/attention.hpp), as
// BLAS products on the packed rows in place (leading dimension 3E, no copy of a head) and core's
// fast softmax over all heads' rows at once. The heads are shared between threads, one BLAS call per
// product, so no bit depends on the thread count. Tested against the reference: ctest -L tiers.
#pragma once

#include <cstddef>

namespace xg::nn::fast {

#include "nn/reference/attention_signatures.inc"  // the signatures, shared by both tiers

}  // namespace xg::nn::fast
