// The normalisations as functions (torch::nn::functional's names): layer_norm, batch_norm,
// group_norm, instance_norm and rms_norm. Each is ONE graph node whose backward is hand-derived
// (docs/derivations/<name>.md) and has a *_composed twin built from core ops, so tests and
// tutorials can show that the fused node and the composed graph agree in value and gradient.
#pragma once

#include <cstdint>

#include "core/ops/ops.hpp"

namespace xg::nn::functional {

/// LayerNorm over the trailing axes given by normalized_shape (jointly), biased variance, eps
/// inside the square root; weight/bias of shape normalized_shape, or undefined for no affine.
/// Output has x's shape. Throws xg::Error naming the shapes when normalized_shape is empty or not
/// x's trailing axes, or weight/bias do not have shape normalized_shape.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
/// layer_norm() built from core ops (mean, sub, var, add, sqrt, div, mul, add); same errors.
Tensor layer_norm_composed(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                           const Tensor& bias = Tensor(), double eps = 1e-5);

/// BatchNorm over (N, C), (N, C, L), (N, C, H, W) or any (N, C, *) input, one statistic per
/// channel C (over N and the trailing axes).
/// training: normalise with the biased batch variance; if running_mean/running_var are defined,
/// update them in place as (1 - momentum) * running + momentum * batch_stat, with the UNBIASED
/// batch variance for running_var. Not training: normalise with the running statistics.
/// Throws "Expected more than 1 value per channel when training" like PyTorch for exactly one
/// value per channel; an empty batch (no value per channel) gives an empty output, zero weight and
/// bias gradients, and leaves the running statistics as they are (PyTorch).
Tensor batch_norm(const Tensor& x, Tensor running_mean, Tensor running_var, const Tensor& weight, const Tensor& bias,
                  bool training, double momentum = 0.1, double eps = 1e-5);
/// batch_norm() built from core ops; same running-statistics update and errors.
Tensor batch_norm_composed(const Tensor& x, Tensor running_mean, Tensor running_var, const Tensor& weight,
                           const Tensor& bias, bool training, double momentum = 0.1, double eps = 1e-5);

/// GroupNorm over (N, C, *): the C channels split into num_groups groups of C / num_groups, each
/// sample's group normalised jointly (biased variance, eps inside the square root), then a
/// per-channel weight (C) and bias (C), either undefined for none. num_groups = 1 is LayerNorm
/// over (C, *) with a per-channel affine; num_groups = C is InstanceNorm. Throws xg::Error naming
/// the shapes when num_groups does not divide C or weight/bias are not (C).
Tensor group_norm(const Tensor& x, std::int64_t num_groups, const Tensor& weight = Tensor(), const Tensor& bias = Tensor(),
                  double eps = 1e-5);
/// group_norm() built from core ops (reshape, mean, var, sub, div, sqrt, mul, add); same errors.
Tensor group_norm_composed(const Tensor& x, std::int64_t num_groups, const Tensor& weight = Tensor(),
                           const Tensor& bias = Tensor(), double eps = 1e-5);

/// InstanceNorm over (N, C, *) with at least one spatial axis: each (sample, channel) normalised
/// over its spatial values (group_norm with num_groups = C), then the per-channel affine. If the
/// running statistics are defined they are updated in place with the average over N of the
/// instances' means and unbiased variances (factor momentum). use_input_stats = false normalises
/// with the running statistics instead (batch_norm in evaluation mode). Throws "Expected more than
/// 1 spatial element when training" like PyTorch, and xg::Error naming the shapes otherwise.
Tensor instance_norm(const Tensor& x, Tensor running_mean = Tensor(), Tensor running_var = Tensor(),
                     const Tensor& weight = Tensor(), const Tensor& bias = Tensor(), bool use_input_stats = true,
                     double momentum = 0.1, double eps = 1e-5);
/// instance_norm() built from core ops; same running-statistics update and errors.
Tensor instance_norm_composed(const Tensor& x, Tensor running_mean = Tensor(), Tensor running_var = Tensor(),
                              const Tensor& weight = Tensor(), const Tensor& bias = Tensor(), bool use_input_stats = true,
                              double momentum = 0.1, double eps = 1e-5);

/// RMSNorm: x / sqrt(mean(x^2 over normalized_shape) + eps) * weight (weight may be undefined).
/// Output has x's shape; shape errors as layer_norm.
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(), double eps = 1e-6);
/// rms_norm() built from core ops (mul, mean, add, sqrt, div, mul); same errors.
Tensor rms_norm_composed(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                         double eps = 1e-6);

}  // namespace xg::nn::functional
