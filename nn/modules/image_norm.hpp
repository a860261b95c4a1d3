// The normalisations of image batches (N, C, H, W), with PyTorch's names, defaults and buffers:
// BatchNorm2d (per channel over N, H, W), GroupNorm (per sample over groups of channels and
// H, W) and InstanceNorm2d (per sample and channel over H, W). LayerNorm over (C, H, W) is
// nn::LayerNorm with normalized_shape {C, H, W}.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "nn/functional/functional.hpp"
#include "nn/modules/module.hpp"
#include "nn/modules/norm_layers.hpp"

namespace xg::nn {

/// Batch normalisation of (N, C, H, W) per channel C, over N, H and W (BatchNormBase, in
/// nn/modules/norm_layers.hpp).
class BatchNorm2d : public BatchNormBase {
public:
    /// Throws xg::Error when num_features is 0 or momentum is outside [0, 1]. forward() takes
    /// (N, num_features, H, W) and keeps the shape.
    explicit BatchNorm2d(std::int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                         bool affine = true, bool track_running_stats = true);

protected:
    void check_input_dim(const Shape& x_shape) const override;
};

/// Group normalisation (Wu & He 2018) of (N, C, *): functional::group_norm. Same in training and
/// evaluation (no running statistics). weight ones (C), bias zeros (C).
class GroupNorm : public Module {
public:
    /// num_groups must divide num_channels (both positive), else xg::Error.
    GroupNorm(std::int64_t num_groups, std::int64_t num_channels, double eps = 1e-5, bool affine = true);
    /// (N, num_channels, *) keeps its shape; another channel count throws naming the shapes.
    Tensor forward(const Tensor& x) override;
    std::string extra_repr() const override;

    ///@{
    /// Groups G and channels C.
    std::size_t num_groups, num_channels;
    ///@}
    /// Added to the variance inside the square root.
    double eps;
    /// Whether the module has weight/bias.
    bool affine;
    /// Per-channel gain (ones) and shift (zeros), shape (C).
    Parameter weight, bias;  ///< undefined without affine
};

/// Instance normalisation of (N, C, H, W) or unbatched (C, H, W): each sample's channel over its
/// H W values (functional::instance_norm). PyTorch's defaults: no affine, no running statistics;
/// with track_running_stats, training updates running_mean/running_var (and num_batches_tracked)
/// and evaluation normalises with them.
class InstanceNorm2d : public Module {
public:
    /// Throws xg::Error when num_features is 0 or momentum is outside [0, 1].
    explicit InstanceNorm2d(std::int64_t num_features, double eps = 1e-5, double momentum = 0.1, bool affine = false,
                            bool track_running_stats = false);
    /// (N, C, H, W) or (C, H, W), shape kept; C must be num_features when the module has
    /// parameters or buffers; training needs more than one spatial element.
    Tensor forward(const Tensor& x) override;
    std::string extra_repr() const override;

    /// Channels C.
    std::size_t num_features;
    /// Added to the variance inside the square root.
    double eps;
    /// Running-statistics update factor (PyTorch's InstanceNorm has no cumulative average).
    double momentum;
    ///@{
    /// Whether the module has weight/bias, and whether it keeps running statistics.
    bool affine, track_running_stats;
    ///@}
    /// Per-channel gain (ones) and shift (zeros), shape (C).
    Parameter weight, bias;  ///< undefined without affine
    ///@{
    /// Running statistics (C) each; num_batches_tracked (0-D) is registered for state_dict
    /// compatibility with PyTorch, which never counts it for InstanceNorm either.
    Tensor running_mean, running_var, num_batches_tracked;  ///< undefined without track_running_stats
    ///@}
};

}  // namespace xg::nn
