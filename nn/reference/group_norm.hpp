// GroupNorm's reference kernels (InstanceNorm is GroupNorm with G = C): docs/derivations/groupnorm.md
// as plain loops. x, y, g = dL/dy and dx are (N, C, S) with S the product of the spatial axes; a
// row is one sample's group, C/G channels, D = (C/G) S contiguous values. w, b, dw and db hold C
// values; mean, rstd and var one per row (N G rows).
// nn/fast/group_norm.hpp has the same functions, tested against these (ctest -L tiers).
#pragma once

#include <cstddef>

namespace xg::nn::reference {

/// Per row: mean, var (biased), rstd = 1 / sqrt(var + eps); y = xhat w_c + b_c, xhat = (x - mean) rstd.
void group_norm_forward(const double* x, const double* w, const double* b, double* y, double* mean, double* rstd, double* var,
                        std::size_t N, std::size_t C, std::size_t G, std::size_t S, double eps);

/// dx (skipped when null) and dw_c += sum g xhat, db_c += sum g over N and S (zeros on entry).
void group_norm_backward(const double* x, const double* g, const double* w, const double* mean, const double* rstd, double* dx,
                         double* dw, double* db, std::size_t N, std::size_t C, std::size_t G, std::size_t S);

}  // namespace xg::nn::reference
