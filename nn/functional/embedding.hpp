// Embedding as a function (torch::nn::functional's name): one graph node with a hand-derived
// backward (docs/derivations/embedding.md).
#pragma once

#include <cstdint>
#include <optional>
#include <type_traits>

#include "core/ops/ops.hpp"

namespace xg::nn::functional {

/// out[..., :] = weight[indices[...], :]: shape indices.shape + (dim,). One graph node; backward
/// scatter-adds rows so repeated indices accumulate, except into row padding_idx (if given; a
/// negative value counts from the end, as PyTorch), whose gradient stays zero. Indices may be an
/// IndexArray, a braced list or a Tensor/Array of whole numbers; out-of-range indices, fractional
/// values and a padding_idx outside [-num_embeddings, num_embeddings) throw.
Tensor embedding(const Indices& indices, const Tensor& weight, std::optional<std::int64_t> padding_idx = std::nullopt);
/// Not with a floating-point padding_idx: it would be truncated silently.
template <class F, class = std::enable_if_t<std::is_floating_point<F>::value>>
Tensor embedding(const Indices& indices, const Tensor& weight, F padding_idx) = delete;

}  // namespace xg::nn::functional
