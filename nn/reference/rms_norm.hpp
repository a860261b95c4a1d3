// RMSNorm's reference kernels: docs/derivations/rmsnorm.md as plain loops. x, y, g = dL/dy and dx
// are `rows` contiguous rows of D values; w holds D values; rrms one per row. T is the storage type
// (double for float64 tensors, float for float32 ones); rrms and the dw sums are double whatever T
// (docs/precision.md, "Accumulators"). nn/fast/rms_norm.hpp has the same functions, tested against
// these (ctest -L tiers).
#pragma once

#include <cstddef>

namespace xg::nn::reference {

#include "nn/reference/rms_norm_signatures.inc"  // the signatures, shared by both tiers

}  // namespace xg::nn::reference
