// Self-attention's reference kernels on packed projections: docs/derivations/attention.md as plain
// loops. qkv holds B*L rows of 3E = 3HD values [q | k | v] (x in_proj_weight^T + in_proj_bias), head
// h's q_i at columns hD .. hD+D-1 of row i, its k_j at E + hD, its v_j at 2E + hD; out holds B*L
// rows of E values, the heads side by side; P holds the B*H attention matrices (L, L), saved for
// the backward. T is the storage type; every value is read as a double and every result stored
// once. nn/fast/attention.hpp has the same functions, tested against these (ctest -L tiers).
#pragma once

#include <cstddef>

namespace xg::nn::reference {

#include "nn/reference/attention_signatures.inc"  // the signatures, shared by both tiers

}  // namespace xg::nn::reference
