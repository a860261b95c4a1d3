// GroupNorm, one row (a sample's group) at a time, with the symbols of docs/derivations/groupnorm.md.
// Row r = n G + group holds channels c = group C/G + k, k < C/G, each S values: value j = k S + s
// of the row belongs to channel c.
#include "nn/reference/group_norm.hpp"

#include <cmath>

#include "core/engine/dtype.hpp"
#include "nn/reference/mean_var.hpp"

namespace xg::nn::reference {

// y = xhat w_c + b_c,  xhat = (x - mean) rstd,  rstd = 1 / sqrt(var + eps)
// Every value read is widened to double and each result rounded once into T (docs/precision.md,
// "Accumulators").
template <class T>
void group_norm_forward(const T* x, const T* w, const T* b, T* y, double* mean, double* rstd, double* var, std::size_t N,
                        std::size_t C, std::size_t G, std::size_t S, double eps) {
    const std::size_t D = C / G * S;
    for (std::size_t r = 0; r < N * G; ++r) {
        const T* xr = x + r * D;
        mean_var(xr, D, mean[r], var[r]);
        rstd[r] = 1.0 / std::sqrt(var[r] + eps);
        for (std::size_t k = 0, j = 0; k < C / G; ++k) {  // channel c: S values of the row
            const std::size_t c = r % G * (C / G) + k;
            for (std::size_t s = 0; s < S; ++s, ++j) {
                const double xhat = (double(xr[j]) - mean[r]) * rstd[r];
                y[r * D + j] = T(xhat * double(w[c]) + double(b[c]));
            }
        }
    }
}

// dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)),  dxhat = g w_c;  dw_c = sum g xhat,  db_c = sum g
template <class T>
void group_norm_backward(const T* x, const T* g, const T* w, const double* mean, const double* rstd, T* dx, double* dw,
                         double* db, std::size_t N, std::size_t C, std::size_t G, std::size_t S) {
    const std::size_t D = C / G * S;
    for (std::size_t r = 0; r < N * G; ++r) {
        const T *xr = x + r * D, *gr = g + r * D;
        double sum_dxhat = 0.0, sum_dxhat_xhat = 0.0;
        for (std::size_t k = 0, j = 0; k < C / G; ++k) {
            const std::size_t c = r % G * (C / G) + k;
            for (std::size_t s = 0; s < S; ++s, ++j) {
                const double xhat = (double(xr[j]) - mean[r]) * rstd[r], dxhat = double(gr[j]) * double(w[c]);
                sum_dxhat += dxhat;
                sum_dxhat_xhat += dxhat * xhat;
                dw[c] += double(gr[j]) * xhat;
                db[c] += double(gr[j]);
            }
        }
        if (dx == nullptr) continue;
        const double mean_dxhat = sum_dxhat / static_cast<double>(D), mean_dxhat_xhat = sum_dxhat_xhat / static_cast<double>(D);
        for (std::size_t k = 0, j = 0; k < C / G; ++k) {
            const std::size_t c = r % G * (C / G) + k;
            for (std::size_t s = 0; s < S; ++s, ++j) {
                const double xhat = (double(xr[j]) - mean[r]) * rstd[r], dxhat = double(gr[j]) * double(w[c]);
                dx[r * D + j] = T(rstd[r] * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat));
            }
        }
    }
}

XG_FOR_EACH_STORAGE_TYPE(XG_GROUP_NORM_KERNELS)

}  // namespace xg::nn::reference
