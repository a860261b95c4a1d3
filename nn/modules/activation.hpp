// Element-wise activations as modules (torch.nn.ReLU, Tanh, Sigmoid), so they can sit in a
// Sequential. Each forward is the core op of the same name; GELU lives in nn/modules/layers.hpp.
#pragma once

#include "core/ops/ops.hpp"
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

}  // namespace xg::nn
