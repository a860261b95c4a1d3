#include "nn/modules/activation.hpp"

namespace xg::nn {

Tensor ReLU::forward(const Tensor& x) { return relu(x); }

Tensor Tanh::forward(const Tensor& x) { return tanh(x); }

Tensor Sigmoid::forward(const Tensor& x) { return sigmoid(x); }

}  // namespace xg::nn
