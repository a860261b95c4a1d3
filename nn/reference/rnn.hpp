// The recurrent cells' reference kernels: the element-wise formulas of docs/derivations/lstm.md as
// plain loops over B rows of H units, the gates of a row side by side ([i, f, g, o] or [r, z, n],
// H values each). The matrix products of lstm_cell and gru_cell are linear's (core/ops/gemm.hpp)
// in both tiers. The fast kernels (nn/fast/rnn.hpp) have the same signatures and are tested
// against these (tests/recurrent/test_recurrent_tiers.cpp).
#pragma once

#include <cstddef>

namespace xg::nn::reference {

/// c' = f c + i g from a (B, 4H); keeps i, f, g (B, H) for the backward.
void lstm_next_c_forward(const double* a, const double* c, std::size_t B, std::size_t H, double* c_next, double* i, double* f,
                         double* g);
/// da_i, da_f, da_g into da (B, 4H; its o quarter is left as it is), dc = dc' f.
void lstm_next_c_backward(const double* dc_next, const double* c, const double* i, const double* f, const double* g, std::size_t B,
                          std::size_t H, double* da, double* dc);
/// h' = o tanh(c') from a (B, 4H) and c'; keeps o and tanh(c').
void lstm_next_h_forward(const double* a, const double* c_next, std::size_t B, std::size_t H, double* h, double* o, double* tanh_c);
/// da_o into da (B, 4H; the other quarters are left as they are), dc' = dh' o (1 - tanh(c')^2).
void lstm_next_h_backward(const double* dh, const double* o, const double* tanh_c, std::size_t B, std::size_t H, double* da,
                          double* dc_next);
/// h' = (1 - z) n + z h from gi, gh (B, 3H) and h; keeps r, z, n.
void gru_next_h_forward(const double* gi, const double* gh, const double* h, std::size_t B, std::size_t H, double* h_next, double* r,
                        double* z, double* n);
/// dgi, dgh (B, 3H) and dh from dh'.
void gru_next_h_backward(const double* dh_next, const double* gh, const double* h, const double* r, const double* z, const double* n,
                         std::size_t B, std::size_t H, double* dgi, double* dgh, double* dh);
/// One LSTM step after its products: `act` holds x W_ih^T + h W_hh^T (B, 4H) on entry and the
/// gates [i, f, g, o] on return; `bias` (4H) is b_ih + b_hh. Writes tanh(c') and hc = [h', c'] (B, 2H).
void lstm_cell_forward(double* act, const double* bias, const double* c, std::size_t B, std::size_t H, double* tanh_c, double* hc);
/// From dhc = [dh', dc'] (B, 2H): da (B, 4H) and dc.
void lstm_cell_backward(const double* dhc, const double* c, const double* act, const double* tanh_c, std::size_t B, std::size_t H,
                        double* da, double* dc);

}  // namespace xg::nn::reference
