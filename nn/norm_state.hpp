// What the modules with running statistics (BatchNorm1d/2d, InstanceNorm2d) share in their .cpp
// files: PyTorch's _NormBase registrations and the bookkeeping around one forward. Not installed.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "nn/module.hpp"

namespace xg::nn::detail {

/// Throws xg::Error naming `module` when momentum is outside [0, 1].
void check_momentum(const char* module, const std::optional<double>& momentum);

/// weight (ones) and bias (zeros) when affine, running_mean (zeros), running_var (ones) and
/// num_batches_tracked (0) when tracking: _NormBase's registrations, under PyTorch's names.
void register_norm_state(Module& m, std::size_t channels, bool affine, bool track, Parameter& weight, Parameter& bias,
                         Tensor& running_mean, Tensor& running_var, Tensor& num_batches_tracked);

/// "0.1", or "None" for a cumulative average (PyTorch's repr).
std::string momentum_str(const std::optional<double>& momentum);

}  // namespace xg::nn::detail
