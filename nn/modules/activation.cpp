#include "nn/modules/activation.hpp"

namespace xg::nn {

Tensor ReLU::forward(const Tensor& x) { return relu(x); }

Tensor Tanh::forward(const Tensor& x) { return tanh(x); }

Tensor Sigmoid::forward(const Tensor& x) { return sigmoid(x); }

GELU::GELU(functional::GeluApproximate approx) : approximate(approx) {}

Tensor GELU::forward(const Tensor& x) { return functional::gelu(x, approximate); }

std::string GELU::extra_repr() const {
    return approximate == functional::GeluApproximate::tanh ? "approximate='tanh'" : "approximate='none'";
}

}  // namespace xg::nn
