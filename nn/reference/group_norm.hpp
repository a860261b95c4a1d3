// GroupNorm's reference kernels (InstanceNorm is GroupNorm with G = C): docs/derivations/groupnorm.md
// as plain loops. x, y, g = dL/dy and dx are (N, C, S) with S the product of the spatial axes; a
// row is one sample's group, C/G channels, D = (C/G) S contiguous values. w, b, dw and db hold C
// values; mean, rstd and var one per row (N G rows).
// nn/fast/group_norm.hpp has the same functions, tested against these (ctest -L tiers).
#pragma once

#include <cstddef>

namespace xg::nn::reference {

#include "nn/reference/group_norm_signatures.inc"  // the signatures, shared by both tiers

}  // namespace xg::nn::reference
