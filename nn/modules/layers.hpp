// Linear, Embedding and Dropout as Modules with PyTorch's names, defaults and
// initialisation (the normalisation layers are in nn/modules/norm_layers.hpp). Heavy lifting is done by
// the functional ops in nn/functional/linear.hpp. GELU is with the activations (nn/modules/activation.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <type_traits>

#include "core/ops/ops.hpp"
#include "core/engine/random.hpp"
#include "nn/functional/dropout.hpp"
#include "nn/functional/embedding.hpp"
#include "nn/functional/linear.hpp"
#include "nn/modules/module.hpp"

namespace xg::nn {

/// y = x W^T + b over the last axis of x (..., in_features); weight (out, in), bias (out).
/// Init as PyTorch: weight and bias ~ U(-1/sqrt(in), 1/sqrt(in)) from the default generator.
class Linear : public Module {
public:
    /// Throws xg::Error naming in_features or out_features when it is not positive. forward() takes
    /// (..., in_features) and gives (..., out_features); another last extent throws naming both shapes.
    Linear(std::int64_t in_features, std::int64_t out_features, bool bias = true);
    Tensor forward(const Tensor& x) override;
    std::string extra_repr() const override;

    ///@{
    /// Sizes of the input's and output's last axis.
    std::size_t in_features, out_features;
    ///@}
    /// Weight (out_features, in_features); bias (out_features).
    Parameter weight, bias;  ///< bias is undefined when constructed with bias = false
};

/// A lookup table of num_embeddings rows of size embedding_dim; weight ~ N(0, 1), with row
/// padding_idx (if given) zeroed and kept out of training, as torch.nn.Embedding.
class Embedding : public Module {
public:
    /// Throws xg::Error naming a size that is not positive, or a padding_idx outside
    /// [-num_embeddings, num_embeddings) (a negative one counts from the end).
    Embedding(std::int64_t num_embeddings, std::int64_t embedding_dim,
              std::optional<std::int64_t> padding_idx = std::nullopt);
    /// Not with a floating-point padding_idx: it would be truncated silently.
    template <class F, class = std::enable_if_t<std::is_floating_point<F>::value>>
    Embedding(std::int64_t num_embeddings, std::int64_t embedding_dim, F padding_idx) = delete;
    /// Rows of weight at `indices` (any shape): indices.shape + (embedding_dim). An index outside
    /// [0, num_embeddings) or, for doubles, not a whole number throws xg::Error naming it and its
    /// position.
    Tensor forward(const Indices& indices);
    /// Indices given as a tensor of whole numbers (so Embedding can sit first in a Sequential).
    Tensor forward(const Tensor& indices) override;
    std::string extra_repr() const override;

    ///@{
    /// Rows in the table, and the size of each row.
    std::size_t num_embeddings, embedding_dim;
    ///@}
    /// The row whose gradient stays zero (a padding token), in [0, num_embeddings), or none.
    std::optional<std::int64_t> padding_idx;
    /// The table (num_embeddings, embedding_dim).
    Parameter weight;
};

/// Inverted dropout in training; the identity in eval. Masks come from the default generator.
class Dropout : public Module {
public:
    /// `p` is the probability of zeroing an element, in [0, 1] (else xg::Error); p = 1 zeroes
    /// everything in training, as PyTorch.
    explicit Dropout(double p = 0.5);
    Tensor forward(const Tensor& x) override;
    std::string extra_repr() const override;

    /// Probability of zeroing an element in training.
    double p;
};

}  // namespace xg::nn
