// RMSNorm, one row at a time, with the symbols of docs/derivations/rmsnorm.md.
#include "nn/reference/rms_norm.hpp"

#include <cmath>

#include "core/engine/dtype.hpp"

namespace xg::nn::reference {

// y = xhat w,  xhat = x rrms,  rrms = 1 / sqrt(mean(x^2) + eps)
// Every value read is widened to double and only y is rounded to T (a float32 op = float32 storage
// + float64 arithmetic between stores; why not float sums: docs/precision.md, "Accumulators").
template <class T>
void rms_norm_forward(const T* x, const T* w, T* y, double* rrms, std::size_t rows, std::size_t D, double eps) {
    for (std::size_t r = 0; r < rows; ++r) {
        const T* xr = x + r * D;
        double sum_x2 = 0.0;
        for (std::size_t j = 0; j < D; ++j) sum_x2 += double(xr[j]) * double(xr[j]);
        rrms[r] = 1.0 / std::sqrt(sum_x2 / static_cast<double>(D) + eps);
        for (std::size_t j = 0; j < D; ++j) {
            const double xhat = double(xr[j]) * rrms[r];
            y[r * D + j] = T(xhat * double(w[j]));
        }
    }
}

// dx = rrms (dxhat - xhat mean(dxhat xhat)),  dxhat = g w;  dw = sum g xhat
template <class T>
void rms_norm_backward(const T* x, const T* g, const T* w, const double* rrms, T* dx, double* dw, std::size_t rows,
                       std::size_t D) {
    for (std::size_t r = 0; r < rows; ++r) {
        const T *xr = x + r * D, *gr = g + r * D;
        double sum_dxhat_xhat = 0.0;
        for (std::size_t j = 0; j < D; ++j) {
            const double xhat = double(xr[j]) * rrms[r], dxhat = double(gr[j]) * double(w[j]);
            sum_dxhat_xhat += dxhat * xhat;
            dw[j] += double(gr[j]) * xhat;
        }
        if (dx == nullptr) continue;
        const double mean_dxhat_xhat = sum_dxhat_xhat / static_cast<double>(D);
        for (std::size_t j = 0; j < D; ++j) {
            const double xhat = double(xr[j]) * rrms[r], dxhat = double(gr[j]) * double(w[j]);
            dx[r * D + j] = T(rrms[r] * (dxhat - xhat * mean_dxhat_xhat));
        }
    }
}

XG_FOR_EACH_STORAGE_TYPE(XG_RMS_NORM_KERNELS)

}  // namespace xg::nn::reference
