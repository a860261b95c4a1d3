// DyT, "Transformers without normalization" (Zhu et al. 2025, arXiv 2503.10622), as a function:
// y = weight * tanh(alpha * x) + bias, one fused graph node, and its composed twin. Derivation of
// the backward: docs/derivations/dyt.md. The module is in nn/modules/dyt.hpp.
#pragma once

#include "core/ops/ops.hpp"

namespace xg::nn {

namespace functional {

/// DyT: y = weight * tanh(alpha * x) + bias, element-wise; weight and bias (shape
/// normalized_shape, the trailing axes of x) broadcast over the leading axes, either may be
/// undefined (1 and 0). alpha is one number, shape (1,) (as the paper's code) or 0-D.
/// One graph node. Throws xg::Error naming "dyt" and the shapes when normalized_shape is empty or
/// not x's trailing axes, weight/bias do not have shape normalized_shape, or alpha is undefined or
/// not of shape (1,) or ().
Tensor dyt(const Tensor& x, const Shape& normalized_shape, const Tensor& alpha, const Tensor& weight = Tensor(),
           const Tensor& bias = Tensor());
/// dyt() built from core ops (mul, tanh, mul, add): same value and gradient, several nodes; same errors.
Tensor dyt_composed(const Tensor& x, const Shape& normalized_shape, const Tensor& alpha, const Tensor& weight = Tensor(),
                    const Tensor& bias = Tensor());

}  // namespace functional

}  // namespace xg::nn
