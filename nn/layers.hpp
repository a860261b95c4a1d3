// The layers a small Transformer needs, as Modules with PyTorch's names, defaults and
// initialisation. Heavy lifting is done by the fused kernels in nn/functional.hpp.
#pragma once

#include <cstdint>
#include <optional>
#include <type_traits>

#include "core/ops.hpp"
#include "core/random.hpp"
#include "nn/functional.hpp"
#include "nn/module.hpp"

namespace xg::nn {

namespace functional {

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
/// dropout); the identity when !training or p == 0. p must be in [0, 1).
Tensor dropout(const Tensor& x, double p, bool training = true, Generator& gen = default_generator());

}  // namespace functional

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

/// GELU activation, element-wise on any shape: x * Phi(x) (exact erf form or tanh approximation).
class GELU : public Module {
public:
    /// `approximate` none (erf) or tanh, as torch.nn.GELU.
    explicit GELU(functional::GeluApproximate approximate = functional::GeluApproximate::none);
    Tensor forward(const Tensor& x) override;
    std::string extra_repr() const override;

    /// Which formula forward() uses.
    functional::GeluApproximate approximate;
};

/// Normalises over the trailing normalized_shape axes (jointly); weight ones, bias zeros.
class LayerNorm : public Module {
public:
    /// Normalises jointly over the trailing axes `normalized_shape` (non-empty, positive extents, else
    /// xg::Error). forward() keeps the input's shape; an input not ending in normalized_shape throws.
    explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
    /// LayerNorm over the last axis of extent `normalized_shape`.
    explicit LayerNorm(std::int64_t normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
    Tensor forward(const Tensor& x) override;
    std::string extra_repr() const override;

    /// The trailing axes normalised together.
    Shape normalized_shape;
    /// Added to the variance inside the square root.
    double eps;
    /// Gain (ones) and shift (zeros), both of shape normalized_shape.
    Parameter weight, bias;  ///< undefined without elementwise_affine
};

/// Batch normalisation of (N, C) or (N, C, L) inputs per channel C. Buffers running_mean (zeros),
/// running_var (ones) and num_batches_tracked (0-D, an int64 buffer: int64 in saved files, as in
/// PyTorch's state_dict; either dtype loads) when track_running_stats. momentum nullopt
/// means a cumulative moving average (factor 1 / num_batches_tracked). Evaluation uses the running
/// statistics, or the batch's own when they are not tracked (as PyTorch does).
class BatchNorm1d : public Module {
public:
    /// Throws xg::Error when num_features is not positive or momentum is outside [0, 1]. forward()
    /// takes (N, num_features) or (N, num_features, L) and keeps the shape; training needs more
    /// than one value per channel.
    explicit BatchNorm1d(std::int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                         bool affine = true, bool track_running_stats = true);
    Tensor forward(const Tensor& x) override;
    std::string extra_repr() const override;

    /// Channels C.
    std::size_t num_features;
    /// Added to the variance inside the square root.
    double eps;
    /// Running-statistics update factor; nullopt for a cumulative average.
    std::optional<double> momentum;
    ///@{
    /// Whether the module has weight/bias, and whether it keeps running statistics.
    bool affine, track_running_stats;
    ///@}
    /// Per-channel gain (ones) and shift (zeros), shape (C).
    Parameter weight, bias;                                    ///< undefined without affine
    ///@{
    /// Running statistics (C) each, and the number of training batches seen (0-D).
    Tensor running_mean, running_var, num_batches_tracked;  ///< undefined without track_running_stats
    ///@}
};

/// x / sqrt(mean(x^2 over normalized_shape) + eps) * weight; weight ones.
class RMSNorm : public Module {
public:
    /// Normalises by the root mean square over the trailing axes `normalized_shape` (non-empty, else
    /// xg::Error); forward() keeps the shape and throws when the input does not end in normalized_shape.
    explicit RMSNorm(Shape normalized_shape, double eps = 1e-6, bool elementwise_affine = true);
    /// RMSNorm over the last axis of extent `normalized_shape`.
    explicit RMSNorm(std::int64_t normalized_shape, double eps = 1e-6, bool elementwise_affine = true);
    Tensor forward(const Tensor& x) override;
    std::string extra_repr() const override;

    /// The trailing axes normalised together.
    Shape normalized_shape;
    /// Added to the mean square inside the square root.
    double eps;
    Parameter weight;  ///< undefined without elementwise_affine
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
    /// `p` is the probability of zeroing an element, in [0, 1) (else xg::Error).
    explicit Dropout(double p = 0.5);
    Tensor forward(const Tensor& x) override;
    std::string extra_repr() const override;

    /// Probability of zeroing an element in training.
    double p;
};

}  // namespace xg::nn
