// The headline computations as functions: each fused op is ONE graph node whose backward is
// hand-derived (docs/derivations/<name>.md) and written as plain loops over contiguous rows.
// Each has a *_composed twin built from core primitive ops, so tests and tutorials can show
// that the fused node and the composed graph agree in value and gradient.
#pragma once

#include <optional>

#include "core/ops.hpp"

namespace xg::nn::functional {

/// y = x W^T + b for x (..., in), weight (out, in), bias (out) or undefined: any leading dims.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
Tensor linear_composed(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

enum class GeluApproximate { none, tanh };

/// GELU: x * Phi(x) with the exact erf form, or PyTorch's tanh approximation.
Tensor gelu(const Tensor& x, GeluApproximate approximate = GeluApproximate::none);
Tensor gelu_composed(const Tensor& x, GeluApproximate approximate = GeluApproximate::none);

/// LayerNorm over the trailing axes given by normalized_shape (jointly), biased variance, eps
/// inside the square root; weight/bias of shape normalized_shape, or undefined for no affine.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
Tensor layer_norm_composed(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                           const Tensor& bias = Tensor(), double eps = 1e-5);

/// BatchNorm over (N, C) or (N, C, L) inputs, one statistic per channel C.
/// training: normalise with the biased batch variance; if running_mean/running_var are defined,
/// update them in place as (1 - momentum) * running + momentum * batch_stat, with the UNBIASED
/// batch variance for running_var. Not training: normalise with the running statistics.
/// Throws "Expected more than 1 value per channel when training" like PyTorch.
Tensor batch_norm(const Tensor& x, Tensor running_mean, Tensor running_var, const Tensor& weight, const Tensor& bias,
                  bool training, double momentum = 0.1, double eps = 1e-5);
Tensor batch_norm_composed(const Tensor& x, Tensor running_mean, Tensor running_var, const Tensor& weight,
                           const Tensor& bias, bool training, double momentum = 0.1, double eps = 1e-5);

/// RMSNorm: x / sqrt(mean(x^2 over normalized_shape) + eps) * weight (weight may be undefined).
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(), double eps = 1e-6);
Tensor rms_norm_composed(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                         double eps = 1e-6);

}  // namespace xg::nn::functional
