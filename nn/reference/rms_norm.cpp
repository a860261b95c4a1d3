// RMSNorm, one row at a time, with the symbols of docs/derivations/rmsnorm.md.
#include "nn/reference/rms_norm.hpp"

#include <cmath>

namespace xg::nn::reference {

// y = xhat w,  xhat = x rrms,  rrms = 1 / sqrt(mean(x^2) + eps)
void rms_norm_forward(const double* x, const double* w, double* y, double* rrms, std::size_t rows, std::size_t D, double eps) {
    for (std::size_t r = 0; r < rows; ++r) {
        const double* xr = x + r * D;
        double sum_x2 = 0.0;
        for (std::size_t j = 0; j < D; ++j) sum_x2 += xr[j] * xr[j];
        rrms[r] = 1.0 / std::sqrt(sum_x2 / static_cast<double>(D) + eps);
        for (std::size_t j = 0; j < D; ++j) {
            const double xhat = xr[j] * rrms[r];
            y[r * D + j] = xhat * w[j];
        }
    }
}

// dx = rrms (dxhat - xhat mean(dxhat xhat)),  dxhat = g w;  dw = sum g xhat
void rms_norm_backward(const double* x, const double* g, const double* w, const double* rrms, double* dx, double* dw,
                       std::size_t rows, std::size_t D) {
    for (std::size_t r = 0; r < rows; ++r) {
        const double *xr = x + r * D, *gr = g + r * D;
        double sum_dxhat_xhat = 0.0;
        for (std::size_t j = 0; j < D; ++j) {
            const double xhat = xr[j] * rrms[r], dxhat = gr[j] * w[j];
            sum_dxhat_xhat += dxhat * xhat;
            dw[j] += gr[j] * xhat;
        }
        if (dx == nullptr) continue;
        const double mean_dxhat_xhat = sum_dxhat_xhat / static_cast<double>(D);
        for (std::size_t j = 0; j < D; ++j) {
            const double xhat = xr[j] * rrms[r], dxhat = gr[j] * w[j];
            dx[r * D + j] = rrms[r] * (dxhat - xhat * mean_dxhat_xhat);
        }
    }
}

}  // namespace xg::nn::reference
