// LayerNorm, one row at a time, with the symbols of docs/derivations/layernorm.md.
#include "nn/reference/layer_norm.hpp"

#include <cmath>

#include "nn/reference/mean_var.hpp"

namespace xg::nn::reference {

// y = xhat w + b,  xhat = (x - mean) rstd,  rstd = 1 / sqrt(var + eps)
void layer_norm_forward(const double* x, const double* w, const double* b, double* y, double* mean, double* rstd,
                        std::size_t rows, std::size_t D, double eps) {
    for (std::size_t r = 0; r < rows; ++r) {
        const double* xr = x + r * D;
        double var;
        mean_var(xr, D, mean[r], var);
        rstd[r] = 1.0 / std::sqrt(var + eps);
        for (std::size_t j = 0; j < D; ++j) {
            const double xhat = (xr[j] - mean[r]) * rstd[r];
            y[r * D + j] = xhat * w[j] + b[j];
        }
    }
}

// dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)),  dxhat = g w;  dw = sum g xhat,  db = sum g
void layer_norm_backward(const double* x, const double* g, const double* w, const double* mean, const double* rstd, double* dx,
                         double* dw, double* db, std::size_t rows, std::size_t D) {
    for (std::size_t r = 0; r < rows; ++r) {
        const double *xr = x + r * D, *gr = g + r * D;
        double sum_dxhat = 0.0, sum_dxhat_xhat = 0.0;
        for (std::size_t j = 0; j < D; ++j) {
            const double xhat = (xr[j] - mean[r]) * rstd[r], dxhat = gr[j] * w[j];
            sum_dxhat += dxhat;
            sum_dxhat_xhat += dxhat * xhat;
            dw[j] += gr[j] * xhat;
            db[j] += gr[j];
        }
        if (dx == nullptr) continue;
        const double mean_dxhat = sum_dxhat / static_cast<double>(D), mean_dxhat_xhat = sum_dxhat_xhat / static_cast<double>(D);
        for (std::size_t j = 0; j < D; ++j) {
            const double xhat = (xr[j] - mean[r]) * rstd[r], dxhat = gr[j] * w[j];
            dx[r * D + j] = rstd[r] * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat);
        }
    }
}

}  // namespace xg::nn::reference
