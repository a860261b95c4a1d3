// Dropout as a function (torch::nn::functional's name).
#pragma once

#include "core/engine/random.hpp"
#include "core/ops/ops.hpp"

namespace xg::nn::functional {

/// Zeroes each element with probability p and scales survivors by 1 / (1 - p) (inverted
/// dropout); the identity when !training or p == 0; zeros (x * 0, gradient 0, no draw) when
/// p == 1, as PyTorch. p must be in [0, 1].
Tensor dropout(const Tensor& x, double p, bool training = true, Generator& gen = default_generator());

}  // namespace xg::nn::functional
