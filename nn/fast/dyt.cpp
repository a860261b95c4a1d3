#include "nn/fast/dyt.hpp"

#include <cmath>

#include "nn/fast/kernel_primitives.hpp"

namespace xg::nn::fast {

void dyt_forward(const double* x, double a, const double* w, const double* b, double* y, std::size_t rows, std::size_t width) {
    const std::size_t n = width;
    for (std::size_t r = 0; r < rows; ++r) {
        const double* xr = x + r * n;
        double* yr = y + r * n;
        for (std::size_t j = 0; j < n; ++j) yr[j] = w[j] * std::tanh(a * xr[j]) + b[j];
    }
}

// With t = tanh(a x) recomputed and s = 1 - t^2 = dt/d(a x): dx = g w a s, and over every row
// d alpha += sum g w x s, dw += g t, db += g. Recomputing t costs one tanh per element; keeping
// it would hold a second input-sized array alive from forward to backward.
void dyt_backward(const double* x, const double* g, double a, const double* w, double* dx, double& dalpha, double* dw, double* db,
                  std::size_t rows, std::size_t width) {
    const std::size_t n = width;
    dalpha = 0.0;
    for (std::size_t r = 0; r < rows; ++r) {
        const double* xr = x + r * n;
        const double* gr = g + r * n;
        double* dxr = dx == nullptr ? nullptr : dx + r * n;
        dalpha += detail::row_sum(n, [=](std::size_t j) {
            const double t = std::tanh(a * xr[j]);
            const double dt = gr[j] * w[j] * (1.0 - t * t);  // dL/d(a x_j)
            if (dxr != nullptr) dxr[j] = dt * a;
            dw[j] += gr[j] * t;
            db[j] += gr[j];
            return dt * xr[j];
        });
    }
}

}  // namespace xg::nn::fast
