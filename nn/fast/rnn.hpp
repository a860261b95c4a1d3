// The recurrent cells' fast kernels: the reference kernels' signatures (nn/reference/rnn.hpp),
// with nn/fast/gate_math.hpp's tanh (a quarter of glibc's cost, within 2 ulp). Tested against the
// reference: tests/recurrent/test_recurrent_tiers.cpp.
#pragma once

#include <cstddef>

namespace xg::nn::fast {

#include "nn/reference/rnn_signatures.inc"  // the signatures, shared by both tiers

}  // namespace xg::nn::fast
