// Multi-head self-attention's core as a function: per head softmax(q k^T / sqrt(D)) v on the packed
// projections [q | k | v] of one input, one fused graph node, and its composed twin. Derivation of
// the backward: docs/derivations/attention.md. The module is in nn/modules/attention.hpp; it runs
// this node for self-attention without masks, dropout or QK-norm.
#pragma once

#include <cstdint>

#include "core/ops/ops.hpp"

namespace xg::nn {

/// (T, T) mask that is true above the diagonal: position t may not attend to positions > t.
/// A negative T throws xg::Error.
Mask causal_mask(std::int64_t T);

namespace functional {

/// qkv (B, L, 3E): the packed projections x in_proj_weight^T + in_proj_bias, q, k, v side by side
/// along the last axis, each made of num_heads heads of D = E / num_heads values. Returns (B, L, E):
/// per batch and head softmax(q k^T / sqrt(D)) v, the heads side by side (what out_proj reads).
/// With `causal`, position i attends to positions 0..i only. When `max_logit` is given it receives
/// the largest scaled score q.k / sqrt(D) attended to. One graph node.
/// Throws xg::Error naming "self_attention" and the shape when qkv is not 3-D or its last axis is
/// not 3 x num_heads x D, or num_heads < 1.
Tensor self_attention(const Tensor& qkv, std::int64_t num_heads, bool causal = false, double* max_logit = nullptr);
/// self_attention() built from core ops (narrow, reshape, permute, mul, matmul, masked_fill, softmax):
/// same value and gradient, many nodes; same errors.
Tensor self_attention_composed(const Tensor& qkv, std::int64_t num_heads, bool causal = false);

}  // namespace functional

}  // namespace xg::nn
