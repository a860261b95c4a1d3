// BatchNorm's fast kernels: the functions of nn/reference/batch_norm.hpp (the same signatures and,
// within the tolerance of tests/batch_norm/test_batch_norm_tiers.cpp, the same results) with the speed
// machinery: thread splits, AVX2 clones, streaming stores (nn/fast/kernel_primitives.hpp).
#pragma once

#include <cstddef>

namespace xg::nn::fast {

/// The batch statistics per channel: mean and biased variance over its M values.
void batch_norm_stats(const double* x, double* mean, double* var, std::size_t N, std::size_t C, std::size_t L);

/// y = xhat w_c + b_c with xhat = (x - mean_c) rstd_c (batch or running statistics).
void batch_norm_forward(const double* x, const double* w, const double* b, const double* mean, const double* rstd, double* y,
                        std::size_t N, std::size_t C, std::size_t L);

/// dx (skipped when null; training: through the batch statistics, else with them constant) and
/// dw += sum g xhat, db += sum g per channel (zeros on entry).
void batch_norm_backward(const double* x, const double* g, const double* w, const double* mean, const double* rstd, double* dx,
                         double* dw, double* db, std::size_t N, std::size_t C, std::size_t L, bool training);

/// dx = w_c rstd_c (g - mean_g_c - xhat mean_g_xhat_c) from given per-channel means of g and
/// g xhat: batch_norm_backward's second pass, for SyncBatchNorm, whose means are over every rank.
void batch_norm_input_grad(const double* x, const double* g, const double* w, const double* mean, const double* rstd,
                           const double* mean_g, const double* mean_g_xhat, double* dx, std::size_t N, std::size_t C,
                           std::size_t L);

}  // namespace xg::nn::fast
