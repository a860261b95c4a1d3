// Element-wise activations as modules (torch.nn.ReLU, Tanh, Sigmoid, GELU), so they can sit in a
// Sequential. Each forward is the op of the same name (GELU's: nn/functional/activation.hpp).
#pragma once

#include <string>

#include "core/ops/ops.hpp"
#include "nn/functional/activation.hpp"
#include "nn/modules/module.hpp"

namespace xg::nn {

/// max(x, 0) element-wise on any shape (xg::relu).
class ReLU : public Module {
public:
    Tensor forward(const Tensor& x) override;
};

/// tanh(x) element-wise on any shape (xg::tanh).
class Tanh : public Module {
public:
    Tensor forward(const Tensor& x) override;
};

/// 1 / (1 + e^-x) element-wise on any shape (xg::sigmoid).
class Sigmoid : public Module {
public:
    Tensor forward(const Tensor& x) override;
};

/// GELU activation, element-wise on any shape: x * Phi(x) (exact erf form or tanh approximation).
class GELU : public Module {
public:
    /// `approximate` none (erf) or tanh, as torch.nn.GELU.
    explicit GELU(functional::GeluApproximate approximate = functional::GeluApproximate::none);
    Tensor forward(const Tensor& x) override;
    std::string extra_repr() const override;

    /// Which formula forward() uses.
    functional::GeluApproximate approximate;
};

}  // namespace xg::nn
