// DyT, "Transformers without normalization" (Zhu et al. 2025, arXiv 2503.10622): a drop-in for
// LayerNorm that computes no statistics, y = weight * tanh(alpha * x) + bias, with one learnable
// scalar alpha and a per-feature affine. The module; the fused op and its twin are in
// nn/functional/dyt.hpp.
#pragma once

#include <cstdint>

#include "core/ops/ops.hpp"
#include "nn/functional/dyt.hpp"
#include "nn/modules/module.hpp"

namespace xg::nn {

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
