// GroupNorm, one row (a sample's group) at a time, with the symbols of docs/derivations/groupnorm.md.
// Row r = n G + group holds channels c = group C/G + k, k < C/G, each S values: value j = k S + s
// of the row belongs to channel c.
#include "nn/reference/group_norm.hpp"

#include <cmath>

#include "nn/reference/mean_var.hpp"

namespace xg::nn::reference {

// y = xhat w_c + b_c,  xhat = (x - mean) rstd,  rstd = 1 / sqrt(var + eps)
void group_norm_forward(const double* x, const double* w, const double* b, double* y, double* mean, double* rstd, double* var,
                        std::size_t N, std::size_t C, std::size_t G, std::size_t S, double eps) {
    const std::size_t D = C / G * S;
    for (std::size_t r = 0; r < N * G; ++r) {
        const double* xr = x + r * D;
        mean_var(xr, D, mean[r], var[r]);
        rstd[r] = 1.0 / std::sqrt(var[r] + eps);
        for (std::size_t k = 0, j = 0; k < C / G; ++k) {  // channel c: S values of the row
            const std::size_t c = r % G * (C / G) + k;
            for (std::size_t s = 0; s < S; ++s, ++j) {
                const double xhat = (xr[j] - mean[r]) * rstd[r];
                y[r * D + j] = xhat * w[c] + b[c];
            }
        }
    }
}

// dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)),  dxhat = g w_c;  dw_c = sum g xhat,  db_c = sum g
void group_norm_backward(const double* x, const double* g, const double* w, const double* mean, const double* rstd, double* dx,
                         double* dw, double* db, std::size_t N, std::size_t C, std::size_t G, std::size_t S) {
    const std::size_t D = C / G * S;
    for (std::size_t r = 0; r < N * G; ++r) {
        const double *xr = x + r * D, *gr = g + r * D;
        double sum_dxhat = 0.0, sum_dxhat_xhat = 0.0;
        for (std::size_t k = 0, j = 0; k < C / G; ++k) {
            const std::size_t c = r % G * (C / G) + k;
            for (std::size_t s = 0; s < S; ++s, ++j) {
                const double xhat = (xr[j] - mean[r]) * rstd[r], dxhat = gr[j] * w[c];
                sum_dxhat += dxhat;
                sum_dxhat_xhat += dxhat * xhat;
                dw[c] += gr[j] * xhat;
                db[c] += gr[j];
            }
        }
        if (dx == nullptr) continue;
        const double mean_dxhat = sum_dxhat / static_cast<double>(D), mean_dxhat_xhat = sum_dxhat_xhat / static_cast<double>(D);
        for (std::size_t k = 0, j = 0; k < C / G; ++k) {
            const std::size_t c = r % G * (C / G) + k;
            for (std::size_t s = 0; s < S; ++s, ++j) {
                const double xhat = (xr[j] - mean[r]) * rstd[r], dxhat = gr[j] * w[c];
                dx[r * D + j] = rstd[r] * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat);
            }
        }
    }
}

}  // namespace xg::nn::reference
