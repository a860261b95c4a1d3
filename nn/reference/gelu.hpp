// GELU's reference kernels: the formulas of docs/derivations/gelu.md as plain loops over n
// elements, for float64 (T = double) and float32 storage (T = float: each value is widened, the
// formula runs in double, the result is rounded once - docs/precision.md). The fast kernels
// (nn/fast/gelu.hpp) have the same signatures and are tested against these
// (tests/gelu/test_gelu_tiers.cpp).
#pragma once

#include <cstddef>


namespace xg::nn::reference {

#include "nn/reference/gelu_signatures.inc"  // the signatures, shared by both tiers

}  // namespace xg::nn::reference
