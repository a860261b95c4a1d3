// Activations as functions (torch::nn::functional's names): GELU as one fused graph node with a
// hand-derived backward (docs/derivations/gelu.md) and its *_composed twin, and the core
// activations under their functional names.
#pragma once

#include "core/ops/ops.hpp"

namespace xg::nn::functional {

// The core activations and softmax under their torch::nn::functional names, so code written
// against `namespace F = xg::nn::functional` finds them next to gelu and the norms.
using xg::log_softmax;
using xg::relu;
using xg::softmax;

/// Which GELU formula: none = exact x * Phi(x) with erf; tanh = PyTorch's tanh approximation.
enum class GeluApproximate { none, tanh };

/// GELU: x * Phi(x) with the exact erf form, or PyTorch's tanh approximation. Any shape, kept.
Tensor gelu(const Tensor& x, GeluApproximate approximate = GeluApproximate::none);
/// gelu() built from core ops (erf or tanh, mul, add).
Tensor gelu_composed(const Tensor& x, GeluApproximate approximate = GeluApproximate::none);

}  // namespace xg::nn::functional
