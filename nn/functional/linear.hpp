// Linear as a function (torch::nn::functional's name): one graph node with a hand-derived backward
// (docs/derivations/linear.md) and a *_composed twin built from core ops. Embedding and dropout
// are in embedding.hpp and dropout.hpp beside it.
#pragma once

#include "core/ops/ops.hpp"

namespace xg::nn::functional {

/// y = x W^T + b for x (..., in), weight (out, in), bias (out) or undefined: any leading dims.
/// Output (..., out). Throws xg::Error naming the shapes when weight is not 2-D, x's last axis is
/// not `in` or bias is not (out).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
/// linear() built from core ops (matmul, transpose, add): same value and gradient, several nodes.
Tensor linear_composed(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace xg::nn::functional
