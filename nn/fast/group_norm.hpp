// GroupNorm's fast kernels: the functions of nn/reference/group_norm.hpp (the same signatures and,
// within the tolerance of tests/group_norm/test_group_norm_tiers.cpp, the same results) with the speed
// machinery: thread splits, AVX2 clones, streaming stores (nn/fast/kernel_primitives.hpp).
#pragma once

#include <cstddef>

namespace xg::nn::fast {

/// Per row: mean, var (biased), rstd = 1 / sqrt(var + eps); y = xhat w_c + b_c, xhat = (x - mean) rstd.
void group_norm_forward(const double* x, const double* w, const double* b, double* y, double* mean, double* rstd, double* var,
                        std::size_t N, std::size_t C, std::size_t G, std::size_t S, double eps);

/// dx (skipped when null) and dw_c += sum g xhat, db_c += sum g over N and S (zeros on entry).
void group_norm_backward(const double* x, const double* g, const double* w, const double* mean, const double* rstd, double* dx,
                         double* dw, double* db, std::size_t N, std::size_t C, std::size_t G, std::size_t S);

}  // namespace xg::nn::fast
