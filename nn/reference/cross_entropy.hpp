// cross_entropy's reference kernels: the formulas of docs/derivations/losses.md as plain loops over
// the n rows of (n, C) logits z. The fast kernels (nn/fast/cross_entropy.hpp) have the same
// signatures and are tested against these (tests/losses/test_losses_tiers.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace xg::nn::reference {

/// Per row n: l[n, :] = log_softmax(z[n, :]) and
/// loss_n = -(1 - s) w[t_n] l[n, t_n] - (s / C) sum_j w_j l[n, j]; both 0 on a row whose target
/// t_n is ignore_index. w null: every class weighs 1. s = label_smoothing.
void cross_entropy_forward(const double* z, const std::int64_t* t, const double* w, double s, std::int64_t ignore_index,
                           std::size_t n, std::size_t C, double* l, double* loss);

/// dz[n, j] = g_n (((1 - s) w[t_n] + (s / C) sum_k w_k) p[n, j] - (1 - s) w[t_n] [j = t_n] - (s / C) w_j),
/// p = e^l; 0 on ignored rows. g holds each row's upstream gradient (already scaled for mean).
void cross_entropy_backward(const double* l, const std::int64_t* t, const double* w, double s, std::int64_t ignore_index,
                            const double* g, std::size_t n, std::size_t C, double* dz);

}  // namespace xg::nn::reference
