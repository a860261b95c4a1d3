// Multi-head attention, batch first, composed from core ops (so every step is differentiable and
// gradchecked through the primitives). Parameter names and init follow torch.nn.MultiheadAttention:
// packed in_proj_weight (3E, E) / in_proj_bias (3E) for q, k, v, then out_proj (a Linear).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/ops/ops.hpp"
#include "nn/functional/attention.hpp"  // causal_mask, which the layer's users pass too
#include "nn/modules/layers.hpp"
#include "nn/modules/norm_layers.hpp"
#include "nn/modules/module.hpp"

namespace xg::nn {

/// What MultiheadAttention::forward_with_weights returns (PyTorch's need_weights=True pair).
struct AttentionOutput {
    Tensor output;   ///< (B, T, E), as forward()
    Tensor weights;  ///< (B, T, S) averaged over heads, or (B, num_heads, T, S); unbatched: no B
};

/// Masks and flags of MultiheadAttention::forward (libtorch passes them as forward arguments;
/// the setters chain, e.g. `MultiheadAttentionForwardOptions().key_padding_mask(pad).is_causal(true)`).
/// A bool mask marks with `true` what may NOT be attended to; a float mask (a Tensor) is added
/// to the attention scores before the softmax (0 keeps a key, -inf removes it, other values bias
/// it; gradients flow into it if it requires them). Bool and float masks may be combined.
class MultiheadAttentionForwardOptions {
public:
    /// (B, S), or (S,) for unbatched inputs: true marks a padding key that no query attends to.
    MultiheadAttentionForwardOptions& key_padding_mask(const Mask& mask) {
        key_padding_mask_ = mask;
        return *this;
    }
    /// (B, S), or (S,) unbatched: added to every query's score for that key.
    MultiheadAttentionForwardOptions& key_padding_mask(const Tensor& additive) {
        key_padding_bias_ = additive;
        return *this;
    }
    /// (T, S), or any shape broadcasting to (B, num_heads, T, S): true = may not attend.
    MultiheadAttentionForwardOptions& attn_mask(const Mask& mask) {
        attn_mask_ = mask;
        return *this;
    }
    /// (T, S), or any shape broadcasting to (B, num_heads, T, S): added to the scores.
    MultiheadAttentionForwardOptions& attn_mask(const Tensor& additive) {
        attn_bias_ = additive;
        return *this;
    }
    /// Query t attends only to keys 0..t (needs as many queries as keys); combines with the masks.
    MultiheadAttentionForwardOptions& is_causal(bool on) {
        is_causal_ = on;
        return *this;
    }
    /// forward_with_weights: average the weights over heads (default true, as PyTorch).
    MultiheadAttentionForwardOptions& average_attn_weights(bool on) {
        average_attn_weights_ = on;
        return *this;
    }
    /// The bool key padding mask, if set.
    const std::optional<Mask>& key_padding_mask() const { return key_padding_mask_; }
    /// The float key padding mask (undefined if not set).
    const Tensor& key_padding_bias() const { return key_padding_bias_; }
    /// The bool attention mask, if set.
    const std::optional<Mask>& attn_mask() const { return attn_mask_; }
    /// The float attention mask (undefined if not set).
    const Tensor& attn_bias() const { return attn_bias_; }
    /// Whether the causal mask applies.
    bool is_causal() const { return is_causal_; }
    /// Whether forward_with_weights averages over heads.
    bool average_attn_weights() const { return average_attn_weights_; }

private:
    std::optional<Mask> key_padding_mask_, attn_mask_;
    Tensor key_padding_bias_, attn_bias_;
    bool is_causal_ = false;
    bool average_attn_weights_ = true;
};

/// Constructor options of MultiheadAttention, as libtorch's MultiheadAttentionOptions; the setters
/// chain: `MultiheadAttention(MultiheadAttentionOptions(64, 4).dropout(0.1).qk_norm(true))`.
class MultiheadAttentionOptions {
public:
    /// Model width and number of heads (checked by the MultiheadAttention constructor).
    MultiheadAttentionOptions(std::int64_t embed_dim, std::int64_t num_heads) : embed_dim_(embed_dim), num_heads_(num_heads) {}
    /// Whether in_proj and out_proj have biases (default true).
    MultiheadAttentionOptions& bias(bool on) {
        bias_ = on;
        return *this;
    }
    /// Dropout probability on the attention weights in training (default 0).
    MultiheadAttentionOptions& dropout(double p) {
        dropout_ = p;
        return *this;
    }
    /// QK-norm (Wortsman et al. 2023, arXiv 2309.14322): a LayerNorm over head_dim on every
    /// head's queries and one on its keys, before the scaled dot product (default false).
    MultiheadAttentionOptions& qk_norm(bool on) {
        qk_norm_ = on;
        return *this;
    }
    /// Model width E.
    std::int64_t embed_dim() const { return embed_dim_; }
    /// Number of heads.
    std::int64_t num_heads() const { return num_heads_; }
    /// Whether the projections have biases.
    bool bias() const { return bias_; }
    /// Attention-weight dropout probability.
    double dropout() const { return dropout_; }
    /// Whether queries and keys are layer-normalised per head.
    bool qk_norm() const { return qk_norm_; }

private:
    std::int64_t embed_dim_, num_heads_;
    bool bias_ = true;
    double dropout_ = 0.0;
    bool qk_norm_ = false;
};

/// Multi-head scaled dot-product attention, batch first, as torch.nn.MultiheadAttention
/// (batch_first=True): softmax(Q K^T / sqrt(head_dim) masked) per head, dropout on those weights
/// in training, times V, then out_proj. With qk_norm, Q and K are layer-normalised over head_dim
/// per head first (child modules q_norm and k_norm: state_dict keys q_norm.weight, q_norm.bias,
/// k_norm.weight, k_norm.bias, each (head_dim), shared by the heads, after out_proj's).
class MultiheadAttention : public Module {
public:
    /// embed_dim must be a positive multiple of num_heads, dropout in [0, 1) (else xg::Error).
    /// Note the order: PyTorch's Python constructor takes dropout before bias.
    MultiheadAttention(std::int64_t embed_dim, std::int64_t num_heads, bool bias = true, double dropout = 0.0);
    /// The same from options, which also turn on QK-norm; the same errors.
    explicit MultiheadAttention(const MultiheadAttentionOptions& options);
    /// Refused at compile time: `MultiheadAttention(E, H, 0.1)` would otherwise turn 0.1 into
    /// bias = true and leave dropout at 0. Write MultiheadAttention(E, H, true, 0.1).
    MultiheadAttention(std::int64_t embed_dim, std::int64_t num_heads, double) = delete;

    /// query (B, T, E), key and value (B, S, E) -> (B, T, E); unbatched (T, E) / (S, E) also work.
    /// attn_mask: true marks a position that may NOT be attended to; shape (T, S) or anything that
    /// broadcasts to (B, num_heads, T, S). A query row with every key masked, a mask that does not
    /// broadcast or inputs whose last axis is not embed_dim throw xg::Error naming the shapes.
    Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value, const Mask* attn_mask = nullptr);
    /// With causal = true, query t attends only to keys 0..t (needs T == S).
    Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value, bool causal);
    /// With key padding, bool or float (additive) masks and/or the causal mask; every error of
    /// the Mask overload, plus a key_padding_mask that is not (B, S) (unbatched: (S,)).
    Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value,
                   const MultiheadAttentionForwardOptions& options);
    /// Self-attention forward(x, x, x) without a mask.
    Tensor forward(const Tensor& x) override;
    /// forward() and the attention weights it used (PyTorch's need_weights=True): after the
    /// softmax and, in training, after dropout, as PyTorch returns them; averaged over heads
    /// unless average_weights is false. The weights are part of the graph.
    AttentionOutput forward_with_weights(const Tensor& query, const Tensor& key, const Tensor& value,
                                         const Mask* attn_mask = nullptr, bool average_weights = true);
    /// forward_with_weights with the masks of `options` (and its average_attn_weights).
    AttentionOutput forward_with_weights(const Tensor& query, const Tensor& key, const Tensor& value,
                                         const MultiheadAttentionForwardOptions& options);
    std::string extra_repr() const override;
    /// The largest attention logit q.k / sqrt(head_dim) (after QK-norm, before any mask is added)
    /// over every batch, head, query and key that the masks leave in play, in the last forward;
    /// what Wortsman et al. watch grow before attention collapses. Throws xg::Error before the
    /// first forward.
    double last_max_logit() const;

    ///@{
    /// Model width E, number of heads, and E / num_heads.
    std::size_t embed_dim, num_heads, head_dim;
    ///@}
    /// Probability of zeroing an attention weight in training (inverted dropout, as nn::dropout).
    double dropout;
    /// Packed q, k, v projection weights (3E, E); in_proj_bias (3E).
    Parameter in_proj_weight, in_proj_bias;  ///< in_proj_bias undefined when bias = false
    /// The output projection Linear(E, E).
    std::shared_ptr<Linear> out_proj;
    ///@{
    /// QK-norm's LayerNorm(head_dim) of the queries and of the keys; null without qk_norm.
    std::shared_ptr<LayerNorm> q_norm, k_norm;
    ///@}

private:
    double last_max_logit_ = 0.0;
    bool has_max_logit_ = false;
    // Keeps the largest of `scores` (B, H, T, S) where `blocked` (empty: nothing is) is 0, read in
    // the scores' own storage (a float32 tensor's is not widened into a float64 mirror).
    void record_max_logit(const Tensor& scores, const std::vector<char>& blocked);
    // Whether forward() can run functional::self_attention on the packed projections: one input
    // (query, key and value the same tensor), batched, no mask but the causal one, no QK-norm, no
    // active dropout.
    bool runs_packed(const Tensor& query, const Tensor& key, const Tensor& value,
                     const MultiheadAttentionForwardOptions& options) const;

    // The batched computation behind forward() and forward_with_weights(): (B, T, E) output and
    // the per-head weights (B, H, T, S).
    AttentionOutput attend(const Tensor& query, const Tensor& key, const Tensor& value,
                           const MultiheadAttentionForwardOptions& options);
};

}  // namespace xg::nn
