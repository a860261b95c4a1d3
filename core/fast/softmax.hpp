// softmax's and log_softmax's fast kernels: the reference kernels' signatures
// (core/reference/softmax.hpp), with the rows shared between threads. Tested against the
// reference: tests/ops/test_ops_tiers.cpp. T = double or float (float32 storage, double arithmetic
// between the loads and the one rounding of each result, as the reference).
#pragma once

#include <cstddef>

namespace xg::fast {

#include "core/reference/softmax_signatures.inc"  // the signatures, shared by both tiers

}  // namespace xg::fast
