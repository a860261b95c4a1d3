// Self-attention on packed projections as one graph node. The kernels: nn/reference/attention.cpp
// (docs/derivations/attention.md as plain loops) and nn/fast/attention.cpp (tested against it).
#include "nn/functional/attention.hpp"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "core/ops/composed_backward.hpp"
#include "nn/fast/attention.hpp"
#include "nn/functional/kernel_storage.hpp"
#include "nn/functional/tier.hpp"
#include "nn/reference/attention.hpp"

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

}  // namespace xg::nn

namespace xg::nn::functional {

namespace {

using detail::by_tier;
using detail::kernel_grad;
using detail::kernel_input;
using detail::kernel_values;

struct Layout {
    std::size_t B, L, H, D;
    double scale() const { return 1.0 / std::sqrt(static_cast<double>(D)); }
};

Layout check_self_attention(const char* op, const Tensor& qkv, std::int64_t num_heads) {
    const Shape s = qkv.shape();
    if (num_heads < 1 || s.size() != 3 || s[2] == 0 || s[2] % (3 * static_cast<std::size_t>(num_heads)) != 0) {
        fail(op, fmt::format("expects qkv of shape (B, L, 3 x num_heads x D) with num_heads >= 1 and D >= 1; got qkv {} "
                             "and num_heads {}",
                             shape_str(s), num_heads));
    }
    const auto H = static_cast<std::size_t>(num_heads);
    return {s[0], s[1], H, s[2] / (3 * H)};
}

// T = float for a float32 qkv (the kernels read and write its storage), double otherwise.
template <class T>
Tensor self_attention_node(const Tensor& qkv, std::int64_t num_heads, bool causal, double* max_logit, const Layout& l) {
    const xt::xarray<T>& x = kernel_values<T>(qkv);
    xt::xarray<T> out = xt::xarray<T>::from_shape({l.B, l.L, l.H * l.D});
    xt::xarray<T> P = xt::xarray<T>::from_shape({l.B, l.H, l.L, l.L});
    const double largest = by_tier(reference::self_attention_forward<T>, fast::self_attention_forward<T>, x.data(), P.data(),
                                   out.data(), l.B, l.L, l.H, l.D, l.scale(), causal);
    if (max_logit) *max_logit = largest;
    std::vector<SavedInfo> saved{{"attention weights", {l.B, l.H, l.L, l.L}}};
    // dv = P^T g, dS = P (g v^T - rowsum(P g v^T)), dq = scale dS k, dk = scale dS^T q (causal or not: P
    // is 0 where a key is not attended to, and so is dS)
    return record(
        "self_attention", std::move(out), {qkv},
        [l, P = std::move(P)](const GradContext& c) -> Grads {
            const xt::xarray<T>& x = kernel_input<T>(c, 0);
            xt::xarray<T> dx = xt::xarray<T>::from_shape(x.shape());
            by_tier(reference::self_attention_backward<T>, fast::self_attention_backward<T>, x.data(), P.data(),
                    kernel_grad<T>(c).data(), dx.data(), l.B, l.L, l.H, l.D, l.scale());
            Grads g(1);
            g[0] = std::move(dx);
            return g;
        },
        std::move(saved),
        // create_graph: the double backward differentiates the composed twin (docs/derivatives.md)
        through_composed([num_heads, causal](const std::vector<Tensor>& in) {
            return self_attention_composed(in[0], num_heads, causal);
        }));
}

}  // namespace

Tensor self_attention(const Tensor& qkv, std::int64_t num_heads, bool causal, double* max_logit) {
    const Layout l = check_self_attention("self_attention", qkv, num_heads);
    return with_storage_type(qkv.dtype(), [&](auto storage) {
        return self_attention_node<typename decltype(storage)::type>(qkv, num_heads, causal, max_logit, l);
    });
}

Tensor self_attention_composed(const Tensor& qkv, std::int64_t num_heads, bool causal) {
    const Layout l = check_self_attention("self_attention_composed", qkv, num_heads);
    const auto B = static_cast<long>(l.B), L = static_cast<long>(l.L), H = static_cast<long>(l.H), D = static_cast<long>(l.D);
    const std::size_t E = l.H * l.D;
    // (B, L, E) -> (B, H, L, D): head h's rows of one part
    const auto heads = [&](std::size_t part) { return permute(reshape(narrow(qkv, 2, part * E, E), {B, L, H, D}), {0, 2, 1, 3}); };
    Tensor scores = matmul(heads(0) * l.scale(), transpose(heads(1), 2, 3));
    if (causal) {  // keys after the query: the most negative number of the dtype, as MultiheadAttention's masks
        const Mask later = causal_mask(static_cast<std::int64_t>(l.L));
        const double most_negative = with_storage_type(scores.dtype(), [](auto storage) {
            return static_cast<double>(std::numeric_limits<typename decltype(storage)::type>::lowest());
        });
        scores = masked_fill(scores, later, most_negative);
    }
    const Tensor context = matmul(softmax(scores, -1), heads(2));  // (B, H, L, D)
    return reshape(permute(context, {0, 2, 1, 3}), {B, L, H * D});
}

}  // namespace xg::nn::functional
