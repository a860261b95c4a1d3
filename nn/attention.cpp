#include "nn/attention.hpp"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "nn/init.hpp"

namespace xg::nn {

Mask causal_mask(std::int64_t length) {
    if (length < 0) fail("causal_mask", fmt::format("T must be non-negative, got {}", length));
    const auto T = static_cast<std::size_t>(length);
    Mask m = Mask::from_shape({T, T});
    for (std::size_t i = 0; i < T; ++i) {
        for (std::size_t j = 0; j < T; ++j) m(i, j) = j > i;
    }
    return m;
}

MultiheadAttention::MultiheadAttention(std::int64_t embed, std::int64_t heads, bool bias, double p)
    : embed_dim(positive_size(embed, "MultiheadAttention", "embed_dim")),
      num_heads(positive_size(heads, "MultiheadAttention", "num_heads")), head_dim(embed_dim / num_heads), dropout(p) {
    const std::size_t e = embed_dim, h = num_heads;
    if (e % h != 0) {
        fail("MultiheadAttention", fmt::format("embed_dim ({}) must be a positive multiple of num_heads ({})", e, h));
    }
    if (!(p >= 0.0 && p < 1.0)) fail("MultiheadAttention", fmt::format("dropout must be in [0, 1), got {}", p));
    // PyTorch: xavier_uniform_ in_proj_weight, zero biases, out_proj.weight keeps Linear's init.
    register_parameter("in_proj_weight", in_proj_weight, init::xavier_uniform_(zeros({3 * e, e})));
    if (bias) register_parameter("in_proj_bias", in_proj_bias, zeros({3 * e}));
    out_proj = register_module("out_proj", std::make_shared<Linear>(e, e, bias));
    if (bias) init::zeros_(out_proj->bias);
}

namespace {

// Rows [k*E, (k+1)*E) of the packed projection: k = 0 query, 1 key, 2 value.
Tensor project(const Tensor& x, const Tensor& w, const Tensor& b, std::size_t k, std::size_t e) {
    return functional::linear(x, narrow(w, 0, k * e, e), b.defined() ? narrow(b, 0, k * e, e) : Tensor());
}

// (B, L, E) -> (B, H, L, D)
Tensor split_heads(const Tensor& x, std::size_t heads, std::size_t d) {
    const Shape s = x.shape();
    return permute(reshape(x, {static_cast<long>(s[0]), static_cast<long>(s[1]), static_cast<long>(heads), static_cast<long>(d)}),
                   {0, 2, 1, 3});
}

}  // namespace

Tensor MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value, const Mask* attn_mask) {
    return forward_with_weights(query, key, value, attn_mask, /*average_weights=*/false).output;  // no averaging work
}

AttentionOutput MultiheadAttention::forward_with_weights(const Tensor& query, const Tensor& key, const Tensor& value,
                                                         const Mask* attn_mask, bool average_weights) {
    const Shape qs = query.shape(), ks = key.shape(), vs = value.shape();
    const bool unbatched = qs.size() == 2;
    const std::size_t rank = unbatched ? 2 : 3;
    const bool ranks_ok = qs.size() == rank && ks.size() == rank && vs.size() == rank && (qs.size() == 2 || qs.size() == 3);
    if (!ranks_ok || qs.back() != embed_dim || ks.back() != embed_dim || vs.back() != embed_dim || ks != vs ||
        (rank == 3 && ks[0] != qs[0])) {
        fail("MultiheadAttention",
             fmt::format("expects query (B, T, {0}) and key = value shape (B, S, {0}) (or unbatched (T, {0}), (S, {0})); "
                         "got query {1}, key {2}, value {3}",
                         embed_dim, shape_str(qs), shape_str(ks), shape_str(vs)));
    }
    if (unbatched) {
        AttentionOutput r =
            forward_with_weights(unsqueeze(query, 0), unsqueeze(key, 0), unsqueeze(value, 0), attn_mask, average_weights);
        return {squeeze(r.output, 0), squeeze(r.weights, 0)};
    }
    AttentionOutput r = attend(query, key, value, attn_mask);
    // PyTorch: attn_output_weights.sum(dim=1) / num_heads
    if (average_weights) r.weights = sum(r.weights, {1}) * (1.0 / static_cast<double>(num_heads));
    return r;
}

AttentionOutput MultiheadAttention::attend(const Tensor& query, const Tensor& key, const Tensor& value, const Mask* attn_mask) {
    const Shape qs = query.shape(), ks = key.shape();
    const std::size_t B = qs[0], T = qs[1], S = ks[1];
    if (attn_mask) {
        const Shape ms(attn_mask->shape().begin(), attn_mask->shape().end());
        const Shape full{B, num_heads, T, S};
        bool fits = ms.size() >= 2 && ms.size() <= 4;
        for (std::size_t i = 0; fits && i < ms.size(); ++i) {
            const std::size_t want = full[4 - ms.size() + i];
            fits = ms[i] == want || ms[i] == 1;
        }
        if (!fits) {
            fail("MultiheadAttention", fmt::format("attn_mask of shape {} does not broadcast to (B, heads, T, S) = {}",
                                                   shape_str(ms), shape_str(full)));
        }
        // A fully masked row would make softmax 0/0 = NaN; refuse it instead.
        const std::size_t row = ms.back();
        for (std::size_t start = 0; row > 0 && start < attn_mask->size(); start += row) {
            bool all = true;
            for (std::size_t j = 0; all && j < row; ++j) all = attn_mask->data()[start + j];
            if (all) {
                fail("MultiheadAttention", fmt::format("attn_mask {} masks every key for some query (row starting at flat "
                                                       "position {}); softmax would be undefined", shape_str(ms), start));
            }
        }
    }
    const Tensor q = split_heads(project(query, in_proj_weight, in_proj_bias, 0, embed_dim), num_heads, head_dim);
    const Tensor k = split_heads(project(key, in_proj_weight, in_proj_bias, 1, embed_dim), num_heads, head_dim);
    const Tensor v = split_heads(project(value, in_proj_weight, in_proj_bias, 2, embed_dim), num_heads, head_dim);
    // softmax(q k^T / sqrt(D)) v per head
    Tensor scores = matmul(q, transpose(k, -1, -2)) * (1.0 / std::sqrt(static_cast<double>(head_dim)));
    // The most negative finite double, not -inf: exp() still gives exactly 0 (no row is fully
    // masked, so the row max is finite), and anomaly mode does not mistake the mask for a fault.
    if (attn_mask) scores = masked_fill(scores, *attn_mask, std::numeric_limits<double>::lowest());
    const Tensor weights = functional::dropout(softmax(scores, -1), dropout, is_training());
    const Tensor context = matmul(weights, v);  // (B, H, T, D)
    const Tensor merged = reshape(permute(context, {0, 2, 1, 3}), {static_cast<long>(B), static_cast<long>(T),
                                                                    static_cast<long>(embed_dim)});
    return {out_proj->forward(merged), weights};
}

Tensor MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value, bool causal) {
    if (!causal) return forward(query, key, value, static_cast<const Mask*>(nullptr));
    const Shape qs = query.shape(), ks = key.shape();
    const std::size_t T = qs.size() >= 2 ? qs[qs.size() - 2] : 0, S = ks.size() >= 2 ? ks[ks.size() - 2] : 0;
    if (qs.size() < 2 || T != S) {
        fail("MultiheadAttention", fmt::format("a causal mask needs as many queries as keys; got query {} and key {}",
                                               shape_str(qs), shape_str(ks)));
    }
    const Mask mask = causal_mask(T);
    return forward(query, key, value, &mask);
}

Tensor MultiheadAttention::forward(const Tensor& x) { return forward(x, x, x, static_cast<const Mask*>(nullptr)); }

std::string MultiheadAttention::extra_repr() const {
    std::string s = fmt::format("embed_dim={}, num_heads={}, bias={}", embed_dim, num_heads, in_proj_bias.defined());
    if (dropout > 0.0) s += fmt::format(", dropout={}", dropout);
    return s;
}

}  // namespace xg::nn
