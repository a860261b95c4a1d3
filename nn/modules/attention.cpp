#include "nn/modules/attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <xtensor/xstrided_view.hpp>

#include "core/fast/strided.hpp"
#include "nn/fast/kernel_primitives.hpp"  // running_max
#include "nn/functional/attention.hpp"
#include "nn/modules/init.hpp"

namespace xg::nn {

MultiheadAttention::MultiheadAttention(std::int64_t embed, std::int64_t heads, bool bias, double p)
    : MultiheadAttention(MultiheadAttentionOptions(embed, heads).bias(bias).dropout(p)) {}

MultiheadAttention::MultiheadAttention(const MultiheadAttentionOptions& options)
    : embed_dim(positive_size(options.embed_dim(), "MultiheadAttention", "embed_dim")),
      num_heads(positive_size(options.num_heads(), "MultiheadAttention", "num_heads")), head_dim(embed_dim / num_heads),
      dropout(options.dropout()) {
    const bool bias = options.bias();
    const double p = options.dropout();
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
    if (options.qk_norm()) {
        const auto d = static_cast<std::int64_t>(head_dim);
        q_norm = register_module("q_norm", std::make_shared<LayerNorm>(d));
        k_norm = register_module("k_norm", std::make_shared<LayerNorm>(d));
    }
}

namespace {

// Rows [k*E, (k+1)*E) of the packed projection: k = 0 query, 1 key, 2 value.
Tensor project(const Tensor& x, const Tensor& w, const Tensor& b, std::size_t k, std::size_t e) {
    return functional::linear(x, narrow(w, 0, k * e, e), b.defined() ? narrow(b, 0, k * e, e) : Tensor());
}

// (B, L, E) -> (B, L, H, D): each head's D values of a position, as one row
Tensor unflatten_heads(const Tensor& x, std::size_t heads, std::size_t d) {
    const Shape s = x.shape();
    return reshape(x, {static_cast<long>(s[0]), static_cast<long>(s[1]), static_cast<long>(heads), static_cast<long>(d)});
}

}  // namespace

Tensor MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value, const Mask* attn_mask) {
    MultiheadAttentionForwardOptions options;
    if (attn_mask) options.attn_mask(*attn_mask);
    return forward(query, key, value, options);
}

bool MultiheadAttention::runs_packed(const Tensor& query, const Tensor& key, const Tensor& value,
                                     const MultiheadAttentionForwardOptions& options) const {
    const bool self_attention = query.defined() && query.node() == key.node() && key.node() == value.node();
    const bool no_masks = !options.attn_mask() && !options.key_padding_mask() && !options.attn_bias().defined() &&
                          !options.key_padding_bias().defined();  // is_causal is the node's own
    const Shape s = self_attention ? query.shape() : Shape{};
    return self_attention && no_masks && !q_norm && (dropout == 0.0 || !is_training()) && s.size() == 3 &&
           s[2] == embed_dim;
}

Tensor MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                   const MultiheadAttentionForwardOptions& options) {
    if (runs_packed(query, key, value, options)) {
        // One product for q, k and v (the packed weight), then the heads' attention as one node
        // reading the packed rows in place: attend()'s attention up to roundoff, in fewer passes
        // (docs/derivations/attention.md, "Cost").
        const Tensor qkv = functional::linear(query, in_proj_weight, in_proj_bias);
        const Tensor context =
            functional::self_attention(qkv, static_cast<std::int64_t>(num_heads), options.is_causal(), &last_max_logit_);
        has_max_logit_ = true;
        return (*out_proj)(context);
    }
    MultiheadAttentionForwardOptions no_averaging = options;  // the weights are dropped: skip that work
    return forward_with_weights(query, key, value, no_averaging.average_attn_weights(false)).output;
}

AttentionOutput MultiheadAttention::forward_with_weights(const Tensor& query, const Tensor& key, const Tensor& value,
                                                         const Mask* attn_mask, bool average_weights) {
    MultiheadAttentionForwardOptions options;
    if (attn_mask) options.attn_mask(*attn_mask);
    return forward_with_weights(query, key, value, options.average_attn_weights(average_weights));
}

AttentionOutput MultiheadAttention::forward_with_weights(const Tensor& query, const Tensor& key, const Tensor& value,
                                                         const MultiheadAttentionForwardOptions& options) {
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
    if (options.is_causal() && qs[rank - 2] != ks[rank - 2]) {
        fail("MultiheadAttention", fmt::format("a causal mask needs as many queries as keys; got query {} and key {}",
                                               shape_str(qs), shape_str(ks)));
    }
    if (unbatched) {
        // The key padding mask (S,) gains the batch axis the inputs gain.
        MultiheadAttentionForwardOptions batched = options;
        const std::size_t S = ks[0];
        if (options.key_padding_mask()) {
            const Mask& m = *options.key_padding_mask();
            if (m.dimension() != 1 || m.size() != S) {
                fail("MultiheadAttention", fmt::format("key_padding_mask of shape {} must be (S,) = ({},) for unbatched key {}",
                                                       shape_str(Shape(m.shape().begin(), m.shape().end())), S, shape_str(ks)));
            }
            batched.key_padding_mask(Mask(xt::reshape_view(m, {std::size_t{1}, S})));
        }
        if (options.key_padding_bias().defined()) {
            const Tensor& b = options.key_padding_bias();
            if (b.shape() != Shape{S}) {
                fail("MultiheadAttention", fmt::format("key_padding_mask of shape {} must be (S,) = ({},) for unbatched key {}",
                                                       shape_str(b.shape()), S, shape_str(ks)));
            }
            batched.key_padding_mask(unsqueeze(b, 0));
        }
        AttentionOutput r = forward_with_weights(unsqueeze(query, 0), unsqueeze(key, 0), unsqueeze(value, 0), batched);
        return {squeeze(r.output, 0), squeeze(r.weights, 0)};
    }
    AttentionOutput r = attend(query, key, value, options);
    // PyTorch: attn_output_weights.sum(dim=1) / num_heads
    if (options.average_attn_weights()) r.weights = sum(r.weights, {1}) * (1.0 / static_cast<double>(num_heads));
    return r;
}

namespace {

// Whether a mask of shape `ms` broadcasts to `full` = (B, heads, T, S) the way attn_mask may:
// 2 to 4 axes, each equal to the matching trailing axis of `full` or 1.
bool fits_scores(const Shape& ms, const Shape& full) {
    bool fits = ms.size() >= 2 && ms.size() <= 4;
    for (std::size_t i = 0; fits && i < ms.size(); ++i) {
        const std::size_t want = full[4 - ms.size() + i];
        fits = ms[i] == want || ms[i] == 1;
    }
    return fits;
}

// Sets in `marks` (B, heads, T, S) every score that `removed(flat index into the mask)` says a
// mask of shape `ms`, broadcast to it, removes.
template <class F>
void mark(std::vector<char>& marks, const Shape& full, const Shape& ms, F removed) {
    const Strides st = broadcast_strides(ms, full);
    for_each_index(full, st, [&](std::size_t i, std::size_t im) { marks[i] = marks[i] || removed(im); });
}

}  // namespace

AttentionOutput MultiheadAttention::attend(const Tensor& query, const Tensor& key, const Tensor& value,
                                           const MultiheadAttentionForwardOptions& options) {
    const Shape qs = query.shape(), ks = key.shape();
    const std::size_t B = qs[0], T = qs[1], S = ks[1];
    const Shape full{B, num_heads, T, S};
    const Shape padding_shape{B, 1, 1, S};  // a key padding mask (B, S) seen against the scores
    const auto shape_of = [](const auto& a) { return Shape(a.shape().begin(), a.shape().end()); };
    const auto check_fits = [&](const Shape& ms, const char* what) {
        if (!fits_scores(ms, full)) {
            fail("MultiheadAttention", fmt::format("{} of shape {} does not broadcast to (B, heads, T, S) = {}", what,
                                                   shape_str(ms), shape_str(full)));
        }
    };
    const auto check_padding = [&](const Shape& ms) {
        if (ms != Shape{B, S}) {
            fail("MultiheadAttention", fmt::format("key_padding_mask of shape {} must be (B, S) = {} for key {}",
                                                   shape_str(ms), shape_str(Shape{B, S}), shape_str(ks)));
        }
    };
    // Every score a bool mask removes (`fill`) or a float mask sets to -inf; a query row left with
    // no key would make the softmax 0/0 = NaN, so it is refused instead.
    const bool bool_masks = options.attn_mask() || options.key_padding_mask() || options.is_causal();
    const bool float_masks = options.attn_bias().defined() || options.key_padding_bias().defined();
    std::vector<char> fill, blocked;
    if (bool_masks || float_masks) fill.assign(B * num_heads * T * S, 0);
    if (options.attn_mask()) {
        const Mask& m = *options.attn_mask();
        check_fits(shape_of(m), "attn_mask");
        mark(fill, full, shape_of(m), [&](std::size_t i) { return m.data()[i]; });
    }
    if (options.key_padding_mask()) {
        const Mask& m = *options.key_padding_mask();
        check_padding(shape_of(m));
        mark(fill, full, padding_shape, [&](std::size_t i) { return m.data()[i]; });
    }
    if (options.is_causal()) {
        const Mask causal = causal_mask(T);
        mark(fill, full, {T, S}, [&](std::size_t i) { return causal.data()[i]; });
    }
    blocked = fill;
    const double minus_inf = -std::numeric_limits<double>::infinity();
    if (options.attn_bias().defined()) {
        const Array& b = options.attn_bias().value();
        check_fits(shape_of(b), "attn_mask");
        mark(blocked, full, shape_of(b), [&](std::size_t i) { return b.data()[i] == minus_inf; });
    }
    if (options.key_padding_bias().defined()) {
        const Array& b = options.key_padding_bias().value();
        check_padding(shape_of(b));
        mark(blocked, full, padding_shape, [&](std::size_t i) { return b.data()[i] == minus_inf; });
    }
    for (std::size_t start = 0; S > 0 && start < blocked.size(); start += S) {
        const auto row_begin = blocked.begin() + static_cast<long>(start);
        if (std::all_of(row_begin, row_begin + static_cast<long>(S), [](char b) { return b != 0; })) {
            const std::size_t row = start / S;
            fail("MultiheadAttention", fmt::format("the attention masks together leave no key: something masks every key "
                                                   "for query {} of head {} in batch {} (scores {}); softmax would be undefined",
                                                   row % T, row / T % num_heads, row / T / num_heads, shape_str(full)));
        }
    }
    Tensor q = unflatten_heads(project(query, in_proj_weight, in_proj_bias, 0, embed_dim), num_heads, head_dim);
    Tensor k = unflatten_heads(project(key, in_proj_weight, in_proj_bias, 1, embed_dim), num_heads, head_dim);
    const Tensor v = permute(unflatten_heads(project(value, in_proj_weight, in_proj_bias, 2, embed_dim), num_heads, head_dim),
                             {0, 2, 1, 3});  // (B, H, S, D)
    if (q_norm) {  // QK-norm: LayerNorm over head_dim of each head's rows (the last axis in any layout)
        q = (*q_norm)(q);
        k = (*k_norm)(k);
    }
    // softmax(q k^T / sqrt(D) + float masks, bool masks applied) v per head: q as (B, H, T, D),
    // scaled before the product as PyTorch's multi_head_attention_forward does (half the elements
    // of the scores when T = S), and k^T taken as (B, H, D, S) in one permute
    const Tensor q_heads = permute(q, {0, 2, 1, 3}) * (1.0 / std::sqrt(static_cast<double>(head_dim)));
    Tensor scores = matmul(q_heads, permute(k, {0, 2, 3, 1}));
    record_max_logit(scores, blocked);
    if (options.attn_bias().defined()) scores = scores + options.attn_bias();
    if (options.key_padding_bias().defined()) {
        scores = scores + reshape(options.key_padding_bias(), {static_cast<long>(B), 1, 1, static_cast<long>(S)});
    }
    // The bool masks fill with the most negative finite number of the scores' dtype, not -inf: exp()
    // still gives exactly 0 (no row is fully masked, so the row max is finite), and anomaly mode does
    // not mistake the mask for a fault.
    if (bool_masks) {
        Mask filled = Mask::from_shape(full);
        std::copy(fill.begin(), fill.end(), filled.begin());
        const double most_negative = with_storage_type(scores.dtype(), [](auto storage) {
            return static_cast<double>(std::numeric_limits<typename decltype(storage)::type>::lowest());
        });
        scores = masked_fill(scores, filled, most_negative);
    }
    const Tensor weights = functional::dropout(softmax(scores, -1), dropout, is_training());
    const Tensor context = matmul(weights, v);  // (B, H, T, D)
    const Tensor merged = reshape(permute(context, {0, 2, 1, 3}), {static_cast<long>(B), static_cast<long>(T),
                                                                    static_cast<long>(embed_dim)});
    return {(*out_proj)(merged), weights};
}

namespace {

// The largest unblocked score, in the scores' own type (exact): with nothing blocked, in running
// maxima (nn/fast/kernel_primitives.hpp); else one running maximum over the unblocked scores.
template <class T>
double largest_unblocked(const xt::xarray<T>& scores, const std::vector<char>& blocked) {
    const T* z = scores.data();
    const std::size_t n = scores.size();
    if (blocked.empty()) return static_cast<double>(detail::running_max(z, n));
    T largest = -std::numeric_limits<T>::infinity();
    for (std::size_t i = 0; i < n; ++i) {
        if (blocked[i] == 0) largest = largest < z[i] ? z[i] : largest;
    }
    return static_cast<double>(largest);
}

}  // namespace

void MultiheadAttention::record_max_logit(const Tensor& scores, const std::vector<char>& blocked) {
    last_max_logit_ = with_storage_type(scores.dtype(), [&](auto storage) {
        return largest_unblocked(scores.values<typename decltype(storage)::type>(), blocked);
    });
    has_max_logit_ = true;
}

double MultiheadAttention::last_max_logit() const {
    if (!has_max_logit_) fail("MultiheadAttention::last_max_logit", "no forward has run yet");
    return last_max_logit_;
}

Tensor MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value, bool causal) {
    return forward(query, key, value, MultiheadAttentionForwardOptions().is_causal(causal));
}

Tensor MultiheadAttention::forward(const Tensor& x) { return forward(x, x, x, static_cast<const Mask*>(nullptr)); }

std::string MultiheadAttention::extra_repr() const {
    std::string s = fmt::format("embed_dim={}, num_heads={}, bias={}", embed_dim, num_heads, in_proj_bias.defined());
    if (dropout > 0.0) s += fmt::format(", dropout={}", dropout);
    if (q_norm) s += ", qk_norm=true";
    return s;
}

}  // namespace xg::nn
