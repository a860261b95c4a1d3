#include "tutorials/common/batch_norm_lstm.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/ops/ops.hpp"
#include "nn/functional/functional.hpp"
#include "nn/modules/init.hpp"

namespace tutorial_values {

using namespace xg;
namespace F = xg::nn::functional;

BatchNormLSTMCell::BatchNormLSTMCell(std::int64_t in_, std::int64_t hidden_, std::int64_t steps_, double gain,
                                     double momentum_, double eps_)
    : input_size(nn::positive_size(in_, "BatchNormLSTMCell", "input_size")),
      hidden_size(nn::positive_size(hidden_, "BatchNormLSTMCell", "hidden_size")),
      max_steps(nn::positive_size(steps_, "BatchNormLSTMCell", "max_steps")), momentum(momentum_), eps(eps_) {
    const std::size_t in = input_size, hidden = hidden_size;
    const double bound = 1.0 / std::sqrt(static_cast<double>(hidden));
    register_parameter("weight_ih", weight_ih, nn::init::uniform_(zeros({4 * hidden, in}), -bound, bound));
    register_parameter("weight_hh", weight_hh, nn::init::uniform_(zeros({4 * hidden, hidden}), -bound, bound));
    register_parameter("bias", bias, zeros({4 * hidden}));
    register_parameter("gain_ih", gain_ih, full({4 * hidden}, gain));
    register_parameter("gain_hh", gain_hh, full({4 * hidden}, gain));
    register_parameter("gain_c", gain_c, full({hidden}, gain));
    register_parameter("bias_c", bias_c, zeros({hidden}));
    const auto running = [&](const std::string& name, std::size_t t, std::size_t n) {
        return Running{register_buffer(fmt::format("{}_running_mean_t{}", name, t), zeros({n})),
                       register_buffer(fmt::format("{}_running_var_t{}", name, t), ones({n}))};
    };
    for (std::size_t t = 0; t < max_steps; ++t) {
        ih_.push_back(running("bn_ih", t, 4 * hidden));
        hh_.push_back(running("bn_hh", t, 4 * hidden));
        c_.push_back(running("bn_c", t, hidden));
    }
}

nn::LSTMState BatchNormLSTMCell::forward(const Tensor& input, const std::optional<nn::LSTMState>& state, std::size_t t) {
    const std::size_t B = input.dim() == 2 ? input.size(0) : 0;
    const nn::LSTMState s = state ? *state : nn::LSTMState{zeros({B, hidden_size}), zeros({B, hidden_size})};
    const Shape want_state{B, hidden_size};
    if (input.dim() != 2 || input.size(1) != input_size || B == 0 || s.h.shape() != want_state || s.c.shape() != want_state) {
        fail("BatchNormLSTMCell", fmt::format("expects input (B, {}) with states (B, {}); got input {}, states {} and {}",
                                              input_size, hidden_size, shape_str(input.shape()), shape_str(s.h.shape()),
                                              shape_str(s.c.shape())));
    }
    const std::size_t k = std::min(t, max_steps - 1);  // later steps share the last step's statistics
    const bool train = is_training();
    const auto bn = [&](const Tensor& v, const Running& r, const Tensor& g, const Tensor& b) {
        return F::batch_norm(v, r.mean, r.var, g, b, train, momentum, eps);
    };
    // gates = BN(W_hh h; γ_hh) + BN(W_ih x; γ_ih) + b; c' = σ(f) c + σ(i) tanh(g); h' = σ(o) tanh(BN(c'; γ_c, β_c))
    const Tensor gates = bn(F::linear(s.h, weight_hh), hh_[k], gain_hh, Tensor()) +
                         bn(F::linear(input, weight_ih), ih_[k], gain_ih, Tensor()) + bias;
    const Tensor c = F::lstm_next_c(gates, s.c);
    return {F::lstm_next_h(gates, bn(c, c_[k], gain_c, bias_c)), c};
}

std::string BatchNormLSTMCell::extra_repr() const {
    return fmt::format("{}, {}, max_steps={}, momentum={}, eps={}", input_size, hidden_size, max_steps, momentum, eps);
}

}  // namespace tutorial_values
