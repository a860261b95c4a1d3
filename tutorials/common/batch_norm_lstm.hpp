// Recurrent BatchNorm LSTM cell (Cooijmans, Ballas, Laurent, Gulcehre & Courville 2016, eq. 6-8),
// tutorial 13's third model beside nn::LSTMCell and nn::LayerNormLSTMCell. Built from library ops
// (functional::linear, functional::batch_norm, lstm_next_c, lstm_next_h); checked by the
// finite-difference gradcheck in tests/tutorials/test_tutorials_blocks_gradcheck.cpp.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "nn/modules/module.hpp"
#include "nn/modules/recurrent.hpp"

namespace tutorial_values {

/// gates = BN_t(W_hh h; γ_hh) + BN_t(W_ih x; γ_ih) + b        (B, 4H), order i, f, g, o
/// c'    = sigmoid(f) c + sigmoid(i) tanh(g)
/// h'    = sigmoid(o) tanh(BN_t(c'; γ_c, β_c))
/// BN_t normalises over the batch. Training: the batch statistics of time step t, and each step
/// t keeps its own running statistics (the paper's per-time-step population statistics; steps
/// from max_steps on share the last step's). Evaluation (eval()): those running statistics. The
/// two BatchNorms on the projections have a gain and no bias; the one bias b is shared. Weights
/// ~ U(-1/sqrt(H), 1/sqrt(H)) as nn::LSTMCell; every γ starts at `gain` (the paper: 0.1), b and
/// β_c at 0.
class BatchNormLSTMCell : public xg::nn::Module {
public:
    /// Throws xg::Error naming BatchNormLSTMCell when a size is 0.
    BatchNormLSTMCell(std::int64_t input_size, std::int64_t hidden_size, std::int64_t max_steps, double gain,
                      double momentum = 0.1, double eps = 1e-5);
    /// Step t (0-based) from `state` (zeros when absent): input (B, input_size), state (B, H)
    /// each. Other shapes throw naming them; training needs B > 1 (batch_norm's error).
    xg::nn::LSTMState forward(const xg::Tensor& input, const std::optional<xg::nn::LSTMState>& state, std::size_t t);
    std::string extra_repr() const override;

    std::size_t input_size, hidden_size, max_steps;
    double momentum, eps;
    xg::nn::Parameter weight_ih, weight_hh;       ///< (4H, input_size), (4H, H)
    xg::nn::Parameter bias;                       ///< b (4H)
    xg::nn::Parameter gain_ih, gain_hh;           ///< γ of BN(W_ih x) and BN(W_hh h), (4H) each
    xg::nn::Parameter gain_c, bias_c;             ///< γ_c and β_c of BN(c'), (H) each

private:
    struct Running {
        xg::Tensor mean, var;  // registered buffers, updated in place by batch_norm in training
    };
    std::vector<Running> ih_, hh_, c_;  // one per time step
};

}  // namespace tutorial_values
