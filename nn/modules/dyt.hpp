// DyT, "Transformers without normalization" (Zhu et al. 2025, arXiv 2503.10622): a drop-in for
// LayerNorm that computes no statistics, y = weight * tanh(alpha * x) + bias, with one learnable
// scalar alpha and a per-feature affine. The fused op, its composed twin and the module.
// Derivation of the backward: docs/derivations/dyt.md.
#pragma once

#include <cstdint>

#include "core/ops/ops.hpp"
#include "nn/modules/module.hpp"

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

/// Dynamic Tanh over the trailing normalized_shape axes: weight * tanh(alpha * x) + bias, as the
/// paper's DynamicTanh (channels_last). Parameters, in registration (and state_dict) order:
/// `alpha` (1,) = alpha_init, `weight` = ones(normalized_shape), `bias` = zeros(normalized_shape),
/// the names and shapes of the paper's code, so its state_dict loads either way.
class DyT : public Module {
public:
    /// Throws xg::Error naming DyT when normalized_shape is empty or has a zero extent. forward()
    /// keeps the input's shape; an input not ending in normalized_shape throws naming both shapes.
    explicit DyT(Shape normalized_shape, double alpha_init = 0.5);
    /// DyT over the last axis of extent `normalized_shape` (positive, else xg::Error).
    explicit DyT(std::int64_t normalized_shape, double alpha_init = 0.5);
    Tensor forward(const Tensor& x) override;
    std::string extra_repr() const override;

    /// The trailing axes weight and bias cover.
    Shape normalized_shape;
    /// The value alpha starts from (0.5 in the paper; it suggests lower for wider or deeper models).
    double alpha_init;
    /// Scale inside the tanh, shape (1,).
    Parameter alpha;
    ///@{
    /// Per-feature gain (ones) and shift (zeros), both of shape normalized_shape.
    Parameter weight, bias;
    ///@}
};

}  // namespace xg::nn
