// The recurrent cells as functions, with PyTorch's gate order: an LSTM step is one fused graph
// node (lstm_cell: both projections, the gates and the new state); a GRU step is its two input
// projections (linear) and a fused node for the gate arithmetic (gru_next_h); lstm_next_c and
// lstm_next_h are the LSTM's element-wise part on its own, for LayerNormLSTMCell. Each has a
// hand-derived backward (docs/derivations/lstm.md); the *_composed cells build the same step from
// core ops only. The layers (LSTMCell, GRUCell, LSTM, GRU, ...) are in nn/modules/recurrent.hpp.
#pragma once

#include "core/ops/ops.hpp"

namespace xg::nn {

/// An LSTM's recurrent state: hidden h and cell c, each (B, H) for a cell, (num_layers, B, H)
/// for a sequence module (no B for unbatched input).
struct LSTMState {
    Tensor h;  ///< hidden state
    Tensor c;  ///< cell state
};

namespace functional {

/// c' = sigmoid(f) c + sigmoid(i) tanh(g), with the pre-activations gates (B, 4H) in PyTorch's
/// order [i, f, g, o] and c (B, H). One graph node. Throws naming the shapes when gates is not
/// (B, 4H) for c (B, H).
Tensor lstm_next_c(const Tensor& gates, const Tensor& c);
/// h' = sigmoid(o) tanh(c'), o from gates (B, 4H) (its last quarter), c' (B, H). One graph node.
/// LayerNormLSTMCell passes LayerNorm(c') here instead of c'.
Tensor lstm_next_h(const Tensor& gates, const Tensor& c_next);
/// GRU step h' = (1 - z) n + z h with r = sigmoid(gi_r + gh_r), z = sigmoid(gi_z + gh_z),
/// n = tanh(gi_n + r gh_n), from gi = x W_ih^T + b_ih and gh = h W_hh^T + b_hh (B, 3H) in
/// PyTorch's order [r, z, n], and h (B, H). One graph node. Throws naming the shapes.
Tensor gru_next_h(const Tensor& gi, const Tensor& gh, const Tensor& h);

/// One LSTM step (torch.lstm_cell): gates = x W_ih^T + b_ih + h W_hh^T + b_hh, then c' and h'
/// as lstm_next_c and lstm_next_h compute them, all in one graph node whose output [h', c']
/// (B, 2H) is handed out as two narrows. x (B, I), state (B, H) each, W_ih (4H, I), W_hh (4H, H),
/// biases (4H) or undefined. Throws naming the shapes.
LSTMState lstm_cell(const Tensor& input, const LSTMState& state, const Tensor& w_ih, const Tensor& w_hh,
                    const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor());
/// lstm_cell() from core ops (linear_composed, narrow, sigmoid, tanh, mul, add).
LSTMState lstm_cell_composed(const Tensor& input, const LSTMState& state, const Tensor& w_ih, const Tensor& w_hh,
                             const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor());
/// One GRU step (torch.gru_cell): gru_next_h(x W_ih^T + b_ih, h W_hh^T + b_hh, h). x (B, I), h
/// (B, H), W_ih (3H, I), W_hh (3H, H), biases (3H) or undefined. Throws naming the shapes.
Tensor gru_cell(const Tensor& input, const Tensor& hx, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih = Tensor(),
                const Tensor& b_hh = Tensor());
/// gru_cell() from core ops (linear_composed, narrow, sigmoid, tanh, mul, add, sub).
Tensor gru_cell_composed(const Tensor& input, const Tensor& hx, const Tensor& w_ih, const Tensor& w_hh,
                         const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor());

}  // namespace functional

}  // namespace xg::nn
