// LayerNorm, BatchNorm1d and RMSNorm as Modules with PyTorch's names, defaults and
// initialisation, over the fused kernels of nn/functional/functional.hpp (the image normalisations
// BatchNorm2d, GroupNorm and InstanceNorm2d are in nn/modules/image_norm.hpp).
#pragma once

#include <cstdint>
#include <optional>

#include "nn/functional/functional.hpp"
#include "nn/modules/module.hpp"

namespace xg::nn {

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

/// What BatchNorm1d and BatchNorm2d share, as torch.nn's _BatchNorm: per-channel weight (ones)
/// and bias (zeros) when affine; buffers running_mean (zeros), running_var (ones) and
/// num_batches_tracked (0-D, an int64 buffer: int64 in saved files, as in PyTorch's state_dict;
/// either dtype loads) when track_running_stats. momentum nullopt means a cumulative moving
/// average (factor 1 / num_batches_tracked). Evaluation uses the running statistics, or the
/// batch's own when they are not tracked (as PyTorch does). The subclasses say which input
/// shapes they take.
class BatchNormBase : public Module {
public:
    /// functional::batch_norm, after check_input_dim(); training needs more than one value per
    /// channel. The batch is counted in num_batches_tracked only once it went through, so a
    /// rejected batch leaves the state untouched.
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

protected:
    /// Throws xg::Error naming `module` when num_features is not positive or momentum is outside [0, 1].
    BatchNormBase(const char* module, std::int64_t num_features, double eps, std::optional<double> momentum, bool affine,
                  bool track_running_stats);
    /// Throws xg::Error naming the module and the shapes when x's shape is not one it takes.
    virtual void check_input_dim(const Shape& x_shape) const = 0;
};

/// Batch normalisation of (N, C) or (N, C, L) inputs per channel C (BatchNormBase).
class BatchNorm1d : public BatchNormBase {
public:
    /// Throws xg::Error when num_features is not positive or momentum is outside [0, 1]. forward()
    /// takes (N, num_features) or (N, num_features, L) and keeps the shape.
    explicit BatchNorm1d(std::int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                         bool affine = true, bool track_running_stats = true);

protected:
    void check_input_dim(const Shape& x_shape) const override;
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

}  // namespace xg::nn
