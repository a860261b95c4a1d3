// What the modules with running statistics (BatchNormBase, InstanceNorm2d) share in their .cpp
// files: PyTorch's _NormBase argument check and registrations. Not installed.
#pragma once

#include <cstddef>
#include <optional>

#include "nn/modules/module.hpp"

namespace xg::nn::detail {

/// Throws xg::Error naming `module` when momentum is outside [0, 1].
void check_momentum(const char* module, const std::optional<double>& momentum);

/// weight (ones) and bias (zeros) when affine, running_mean (zeros), running_var (ones) and
/// num_batches_tracked (0) when tracking: _NormBase's registrations, under PyTorch's names.
void register_norm_state(Module& m, std::size_t channels, bool affine, bool track, Parameter& weight, Parameter& bias,
                         Tensor& running_mean, Tensor& running_var, Tensor& num_batches_tracked);

}  // namespace xg::nn::detail
