// Linear, embedding and dropout as functions (torch::nn::functional's names). linear and
// embedding are one graph node each with a hand-derived backward (docs/derivations/linear.md,
// docs/derivations/embedding.md); linear has a *_composed twin built from core ops.
#pragma once

#include <cstdint>
#include <optional>
#include <type_traits>

#include "core/engine/random.hpp"
#include "core/ops/ops.hpp"

namespace xg::nn::functional {

/// y = x W^T + b for x (..., in), weight (out, in), bias (out) or undefined: any leading dims.
/// Output (..., out). Throws xg::Error naming the shapes when weight is not 2-D, x's last axis is
/// not `in` or bias is not (out).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
/// linear() built from core ops (matmul, transpose, add): same value and gradient, several nodes.
Tensor linear_composed(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

/// out[..., :] = weight[indices[...], :]: shape indices.shape + (dim,). One graph node; backward
/// scatter-adds rows so repeated indices accumulate, except into row padding_idx (if given; a
/// negative value counts from the end, as PyTorch), whose gradient stays zero. Indices may be an
/// IndexArray, a braced list or a Tensor/Array of whole numbers; out-of-range indices, fractional
/// values and a padding_idx outside [-num_embeddings, num_embeddings) throw.
Tensor embedding(const Indices& indices, const Tensor& weight, std::optional<std::int64_t> padding_idx = std::nullopt);
/// Not with a floating-point padding_idx: it would be truncated silently.
template <class F, class = std::enable_if_t<std::is_floating_point<F>::value>>
Tensor embedding(const Indices& indices, const Tensor& weight, F padding_idx) = delete;

/// Zeroes each element with probability p and scales survivors by 1 / (1 - p) (inverted
/// dropout); the identity when !training or p == 0; zeros (x * 0, gradient 0, no draw) when
/// p == 1, as PyTorch. p must be in [0, 1].
Tensor dropout(const Tensor& x, double p, bool training = true, Generator& gen = default_generator());

}  // namespace xg::nn::functional
