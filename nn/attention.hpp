// Multi-head attention, batch first, composed from core ops (so every step is differentiable and
// gradchecked through the primitives). Parameter names and init follow torch.nn.MultiheadAttention:
// packed in_proj_weight (3E, E) / in_proj_bias (3E) for q, k, v, then out_proj (a Linear).
#pragma once

#include "core/ops.hpp"
#include "nn/layers.hpp"
#include "nn/module.hpp"

namespace xg::nn {

/// (T, T) mask that is true above the diagonal: position t may not attend to positions > t.
Mask causal_mask(std::size_t T);

class MultiheadAttention : public Module {
public:
    MultiheadAttention(std::size_t embed_dim, std::size_t num_heads, bool bias = true);

    /// query (B, T, E), key and value (B, S, E) -> (B, T, E); unbatched (T, E) / (S, E) also work.
    /// attn_mask: true marks a position that may NOT be attended to; shape (T, S) or anything that
    /// broadcasts to (B, num_heads, T, S). A query row with every key masked is an error.
    Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value, const Mask* attn_mask = nullptr);
    /// With causal = true, query t attends only to keys 0..t (needs T == S).
    Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value, bool causal);
    /// Self-attention forward(x, x, x) without a mask.
    Tensor forward(const Tensor& x) override;
    std::string extra_repr() const override;

    std::size_t embed_dim, num_heads, head_dim;
    Tensor in_proj_weight, in_proj_bias;  ///< in_proj_bias undefined when bias = false
    std::shared_ptr<Linear> out_proj;
};

}  // namespace xg::nn
