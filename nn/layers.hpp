// The layers a small Transformer needs, as Modules with PyTorch's names, defaults and
// initialisation. Heavy lifting is done by the fused kernels in nn/functional.hpp.
#pragma once

#include <cstdint>
#include <optional>

#include "core/ops.hpp"
#include "core/random.hpp"
#include "nn/functional.hpp"
#include "nn/module.hpp"

namespace xg::nn {

namespace functional {

/// out[..., :] = weight[indices[...], :]: shape indices.shape + (dim,). One graph node; backward
/// scatter-adds rows so repeated indices accumulate. Out-of-range indices throw.
Tensor embedding(const IndexArray& indices, const Tensor& weight);

/// Zeroes each element with probability p and scales survivors by 1 / (1 - p) (inverted
/// dropout); the identity when !training or p == 0. p must be in [0, 1).
Tensor dropout(const Tensor& x, double p, bool training = true, Generator& gen = default_generator());

}  // namespace functional

/// y = x W^T + b over the last axis of x (..., in_features); weight (out, in), bias (out).
/// Init as PyTorch: weight and bias ~ U(-1/sqrt(in), 1/sqrt(in)) from the default generator.
class Linear : public Module {
public:
    Linear(std::size_t in_features, std::size_t out_features, bool bias = true);
    Tensor forward(const Tensor& x) override;
    std::string extra_repr() const override;

    std::size_t in_features, out_features;
    Tensor weight, bias;  ///< bias is undefined when constructed with bias = false
};

class GELU : public Module {
public:
    explicit GELU(functional::GeluApproximate approximate = functional::GeluApproximate::none);
    Tensor forward(const Tensor& x) override;
    std::string extra_repr() const override;

    functional::GeluApproximate approximate;
};

/// Normalises over the trailing normalized_shape axes (jointly); weight ones, bias zeros.
class LayerNorm : public Module {
public:
    explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
    explicit LayerNorm(std::size_t normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
    Tensor forward(const Tensor& x) override;
    std::string extra_repr() const override;

    Shape normalized_shape;
    double eps;
    Tensor weight, bias;  ///< undefined without elementwise_affine
};

/// Batch normalisation of (N, C) or (N, C, L) inputs per channel C. Buffers running_mean (zeros),
/// running_var (ones) and num_batches_tracked (0-D) when track_running_stats. momentum nullopt
/// means a cumulative moving average (factor 1 / num_batches_tracked). Evaluation uses the running
/// statistics, or the batch's own when they are not tracked (as PyTorch does).
class BatchNorm1d : public Module {
public:
    explicit BatchNorm1d(std::size_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                         bool affine = true, bool track_running_stats = true);
    Tensor forward(const Tensor& x) override;
    std::string extra_repr() const override;

    std::size_t num_features;
    double eps;
    std::optional<double> momentum;
    bool affine, track_running_stats;
    Tensor weight, bias;                                    ///< undefined without affine
    Tensor running_mean, running_var, num_batches_tracked;  ///< undefined without track_running_stats
};

/// x / sqrt(mean(x^2 over normalized_shape) + eps) * weight; weight ones.
class RMSNorm : public Module {
public:
    explicit RMSNorm(Shape normalized_shape, double eps = 1e-6, bool elementwise_affine = true);
    explicit RMSNorm(std::size_t normalized_shape, double eps = 1e-6, bool elementwise_affine = true);
    Tensor forward(const Tensor& x) override;
    std::string extra_repr() const override;

    Shape normalized_shape;
    double eps;
    Tensor weight;  ///< undefined without elementwise_affine
};

/// A lookup table of num_embeddings rows of size embedding_dim; weight ~ N(0, 1).
class Embedding : public Module {
public:
    Embedding(std::size_t num_embeddings, std::size_t embedding_dim);
    Tensor forward(const IndexArray& indices);
    /// Indices given as a tensor of whole numbers (so Embedding can sit first in a Sequential).
    Tensor forward(const Tensor& indices) override;
    std::string extra_repr() const override;

    std::size_t num_embeddings, embedding_dim;
    Tensor weight;
};

/// Inverted dropout in training; the identity in eval. Masks come from the default generator.
class Dropout : public Module {
public:
    explicit Dropout(double p = 0.5);
    Tensor forward(const Tensor& x) override;
    std::string extra_repr() const override;

    double p;
};

}  // namespace xg::nn
