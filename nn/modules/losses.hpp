// The losses as modules (torch.nn.CrossEntropyLoss, MSELoss); the functions they call are in
// nn/functional/losses.hpp.
#pragma once

#include "nn/functional/losses.hpp"
#include "nn/modules/module.hpp"

namespace xg::nn {

/// The options of CrossEntropyLoss (the same as cross_entropy's, as in PyTorch's C++ frontend).
using CrossEntropyLossOptions = CrossEntropyFuncOptions;

/// cross_entropy as a module: `nn::CrossEntropyLoss criterion; criterion.forward(logits, targets)`.
class CrossEntropyLoss : public Module {
public:
    /// The options every forward() uses (weight, ignore_index, reduction, label_smoothing).
    explicit CrossEntropyLoss(const CrossEntropyLossOptions& options = {}) : options(options) {}
    /// cross_entropy(logits, targets, options): same layouts and errors.
    Tensor forward(const Tensor& logits, const Indices& targets);
    /// The options forward() uses.
    CrossEntropyLossOptions options;
};

/// mse_loss as a module: `nn::MSELoss criterion; criterion.forward(prediction, target)`.
class MSELoss : public Module {
public:
    /// How forward() combines the per-element losses (default mean).
    explicit MSELoss(Reduction reduction = Reduction::mean) : reduction(reduction) {}
    /// mse_loss(input, target, reduction).
    Tensor forward(const Tensor& input, const Tensor& target);
    /// The reduction forward() uses.
    Reduction reduction;
};

}  // namespace xg::nn
