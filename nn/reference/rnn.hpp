// The recurrent cells' reference kernels: the element-wise formulas of docs/derivations/lstm.md as
// plain loops over B rows of H units, the gates of a row side by side ([i, f, g, o] or [r, z, n],
// H values each). The matrix products of lstm_cell and gru_cell are linear's (core/ops/gemm.hpp)
// in both tiers. The fast kernels (nn/fast/rnn.hpp) have the same signatures and are tested
// against these (tests/recurrent/test_recurrent_tiers.cpp).
#pragma once

#include <cstddef>

namespace xg::nn::reference {

#include "nn/reference/rnn_signatures.inc"  // the signatures, shared by both tiers

}  // namespace xg::nn::reference
