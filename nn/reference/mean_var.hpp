// The statistics of one row, shared by the reference LayerNorm and GroupNorm kernels.
#pragma once

#include <algorithm>
#include <cstddef>

namespace xg::nn::reference {

/// Mean and biased variance of the n values at x by the corrected two-pass algorithm
/// (docs/derivations/layernorm.md, Numerics): m = sum(x)/n, d = x - m, then
/// mean = m + sum(d)/n, var = (sum(d^2) - sum(d)^2/n)/n, clamped at 0. The sums are double
/// whatever the storage type T (docs/precision.md, "Accumulators").
template <class T>
inline void mean_var(const T* x, std::size_t n, double& mean, double& var) {
    double m = 0.0;
    for (std::size_t j = 0; j < n; ++j) m += double(x[j]);
    m /= static_cast<double>(n);
    double sum_d = 0.0, sum_d2 = 0.0;
    for (std::size_t j = 0; j < n; ++j) {
        const double d = double(x[j]) - m;
        sum_d += d;
        sum_d2 += d * d;
    }
    mean = m + sum_d / static_cast<double>(n);
    var = std::max(0.0, (sum_d2 - sum_d * sum_d / static_cast<double>(n)) / static_cast<double>(n));
}

}  // namespace xg::nn::reference
