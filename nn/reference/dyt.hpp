// DyT's reference kernels: the formulas of docs/derivations/dyt.md as plain loops over `rows`
// contiguous rows of `width` = prod(normalized_shape) elements. The fast kernels
// (nn/fast/dyt.hpp) have the same signatures and are tested against these
// (tests/dyt/test_dyt_tiers.cpp).
#pragma once

#include <cstddef>

namespace xg::nn::reference {

#include "nn/reference/dyt_signatures.inc"  // the signatures, shared by both tiers

}  // namespace xg::nn::reference
