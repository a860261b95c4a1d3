#include "nn/modules/losses.hpp"

namespace xg::nn {

Tensor CrossEntropyLoss::forward(const Tensor& logits, const Indices& targets) {
    return cross_entropy(logits, targets, options);
}

Tensor MSELoss::forward(const Tensor& input, const Tensor& target) { return mse_loss(input, target, reduction); }

}  // namespace xg::nn
