// The recurrent cells' fast kernels: the reference kernels' signatures (nn/reference/rnn.hpp),
// with nn/fast/gate_math.hpp's tanh (a quarter of glibc's cost, within 2 ulp). Tested against the
// reference: tests/recurrent/test_recurrent_tiers.cpp.
#pragma once

#include <cstddef>

namespace xg::nn::fast {

void lstm_next_c_forward(const double* a, const double* c, std::size_t B, std::size_t H, double* c_next, double* i, double* f,
                         double* g);
void lstm_next_c_backward(const double* dc_next, const double* c, const double* i, const double* f, const double* g, std::size_t B,
                          std::size_t H, double* da, double* dc);
void lstm_next_h_forward(const double* a, const double* c_next, std::size_t B, std::size_t H, double* h, double* o, double* tanh_c);
void lstm_next_h_backward(const double* dh, const double* o, const double* tanh_c, std::size_t B, std::size_t H, double* da,
                          double* dc_next);
void gru_next_h_forward(const double* gi, const double* gh, const double* h, std::size_t B, std::size_t H, double* h_next, double* r,
                        double* z, double* n);
void gru_next_h_backward(const double* dh_next, const double* gh, const double* h, const double* r, const double* z, const double* n,
                         std::size_t B, std::size_t H, double* dgi, double* dgh, double* dh);
void lstm_cell_forward(double* act, const double* bias, const double* c, std::size_t B, std::size_t H, double* tanh_c, double* hc);
void lstm_cell_backward(const double* dhc, const double* c, const double* act, const double* tanh_c, std::size_t B, std::size_t H,
                        double* da, double* dc);

}  // namespace xg::nn::fast
