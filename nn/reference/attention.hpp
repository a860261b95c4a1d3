// Self-attention's reference kernels on packed projections: docs/derivations/attention.md as plain
// loops. qkv holds B*L rows of 3E = 3HD values [q | k | v] (x in_proj_weight^T + in_proj_bias), head
// h's q_i at columns hD .. hD+D-1 of row i, its k_j at E + hD, its v_j at 2E + hD; out holds B*L
// rows of E values, the heads side by side; P holds the B*H attention matrices (L, L), saved for
// the backward. T is the storage type; every value is read as a double and every result stored
// once. nn/fast/attention.hpp has the same functions, tested against these (ctest -L tiers).
#pragma once

#include <cstddef>

namespace xg::nn::reference {

/// Per batch b and head h: s_ij = scale q_i.k_j, P_i = softmax_j(s_i), out_i = sum_j P_ij v_j; with
/// `causal`, query i attends to keys j <= i only (P_ij = 0 above the diagonal). Returns the largest
/// s_ij attended to (what MultiheadAttention::last_max_logit reports).
template <class T>
double self_attention_forward(const T* qkv, T* P, T* out, std::size_t B, std::size_t L, std::size_t H, std::size_t D,
                              double scale, bool causal);

/// dqkv (every entry written) from g = dL/dout (a causal forward's zeros of P above the diagonal
/// make dS zero there: the same formulas): dv_j = sum_i P_ij g_i, dP_ij = g_i.v_j,
/// dS_ij = P_ij (dP_ij - sum_j' P_ij' dP_ij'), dq_i = scale sum_j dS_ij k_j, dk_j = scale sum_i dS_ij q_i.
template <class T>
void self_attention_backward(const T* qkv, const T* P, const T* g, T* dqkv, std::size_t B, std::size_t L, std::size_t H,
                             std::size_t D, double scale);

extern template double self_attention_forward<double>(const double*, double*, double*, std::size_t, std::size_t, std::size_t,
                                                      std::size_t, double, bool);
extern template double self_attention_forward<float>(const float*, float*, float*, std::size_t, std::size_t, std::size_t,
                                                     std::size_t, double, bool);
extern template void self_attention_backward<double>(const double*, const double*, const double*, double*, std::size_t,
                                                     std::size_t, std::size_t, std::size_t, double);
extern template void self_attention_backward<float>(const float*, const float*, const float*, float*, std::size_t,
                                                    std::size_t, std::size_t, std::size_t, double);

}  // namespace xg::nn::reference
