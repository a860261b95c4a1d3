// Loss functions (torch.nn.functional names). Each is one fused graph node with a hand-derived
// backward; derivations in docs/derivations/embedding.md (cross_entropy: softmax minus the
// smoothed one-hot target).
#pragma once

#include "core/ops.hpp"

namespace xg::nn {

/// How per-element losses are combined, as PyTorch's `reduction=` argument.
enum class Reduction { none, mean, sum };

/// Cross-entropy of logits (N, C) against class indices targets (N,), each in [0, C).
/// Per row: (1 - ls) * (-log p[target]) + ls * mean_over_classes(-log p), p = softmax(logits),
/// ls = label_smoothing in [0, 1] (PyTorch's convention). `mean` divides by N; `none` gives (N,).
Tensor cross_entropy(const Tensor& logits, const IndexArray& targets, Reduction reduction = Reduction::mean,
                     double label_smoothing = 0.0);

/// Mean squared error (input - target)^2 over same-shaped tensors; both may need gradients.
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean);

namespace functional {
using nn::cross_entropy;
using nn::mse_loss;
}  // namespace functional

}  // namespace xg::nn
