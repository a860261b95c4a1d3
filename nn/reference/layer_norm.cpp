// LayerNorm, one row at a time, with the symbols of docs/derivations/layernorm.md.
#include "nn/reference/layer_norm.hpp"

#include <cmath>

#include "nn/reference/mean_var.hpp"
#include "core/engine/dtype.hpp"

namespace xg::nn::reference {

// y = xhat w + b,  xhat = (x - mean) rstd,  rstd = 1 / sqrt(var + eps)
// Every value read is widened to double and only y is rounded to T (a float32 op = float32 storage
// + float64 arithmetic between stores; why not float sums: docs/precision.md, "Accumulators").
template <class T>
void layer_norm_forward(const T* x, const T* w, const T* b, T* y, double* mean, double* rstd, std::size_t rows, std::size_t D,
                        double eps) {
    for (std::size_t r = 0; r < rows; ++r) {
        const T* xr = x + r * D;
        double var;
        mean_var(xr, D, mean[r], var);
        rstd[r] = 1.0 / std::sqrt(var + eps);
        for (std::size_t j = 0; j < D; ++j) {
            const double xhat = (double(xr[j]) - mean[r]) * rstd[r];
            y[r * D + j] = T(xhat * double(w[j]) + double(b[j]));
        }
    }
}

// dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)),  dxhat = g w;  dw = sum g xhat,  db = sum g
// The sums (and dw, db) are double whatever T: docs/precision.md, "Accumulators".
template <class T>
void layer_norm_backward(const T* x, const T* g, const T* w, const double* mean, const double* rstd, T* dx, double* dw,
                         double* db, std::size_t rows, std::size_t D) {
    for (std::size_t r = 0; r < rows; ++r) {
        const T *xr = x + r * D, *gr = g + r * D;
        double sum_dxhat = 0.0, sum_dxhat_xhat = 0.0;
        for (std::size_t j = 0; j < D; ++j) {
            const double xhat = (double(xr[j]) - mean[r]) * rstd[r], dxhat = double(gr[j]) * double(w[j]);
            sum_dxhat += dxhat;
            sum_dxhat_xhat += dxhat * xhat;
            dw[j] += double(gr[j]) * xhat;
            db[j] += double(gr[j]);
        }
        if (dx == nullptr) continue;
        const double mean_dxhat = sum_dxhat / static_cast<double>(D), mean_dxhat_xhat = sum_dxhat_xhat / static_cast<double>(D);
        for (std::size_t j = 0; j < D; ++j) {
            const double xhat = (double(xr[j]) - mean[r]) * rstd[r], dxhat = double(gr[j]) * double(w[j]);
            dx[r * D + j] = T(rstd[r] * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat));
        }
    }
}

XG_FOR_EACH_STORAGE_TYPE(XG_LAYER_NORM_KERNELS)

}  // namespace xg::nn::reference
