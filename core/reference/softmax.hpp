// softmax's and log_softmax's reference kernels: the formulas of docs/autograd.md, section 7, as
// plain loops. The tensor is seen as (outer, len, inner) around the axis: element j of row (o, i)
// sits at (o len + j) inner + i. The fast kernels (core/fast/softmax.hpp) have the same
// signatures and are tested against these (tests/ops/test_ops_tiers.cpp).
//
// T is the storage: double, or float for a float32 tensor, whose values are read into doubles,
// computed in double (the row maximum, the exponentials and the row sums) and each result
// rounded once when stored (docs/precision.md, "Accumulators").
#pragma once

#include <cstddef>

namespace xg::reference {

#include "core/reference/softmax_signatures.inc"  // the signatures, shared by both tiers

}  // namespace xg::reference
