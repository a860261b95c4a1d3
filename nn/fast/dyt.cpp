// DyT's fast kernels: nn/reference/dyt.cpp's loops with the row sum of d alpha in kLanes partial
// sums (nn/fast/kernel_primitives.hpp). One body per loop, a template on the storage type T; the
// arithmetic is double and each stored value rounded once into T.
#include "nn/fast/dyt.hpp"

#include <cmath>

#include "core/engine/dtype.hpp"
#include "nn/fast/kernel_primitives.hpp"

namespace xg::nn::fast {

template <class T>
void dyt_forward(const T* x, double a, const T* w, const T* b, T* y, std::size_t rows, std::size_t width) {
    const std::size_t n = width;
    for (std::size_t r = 0; r < rows; ++r) {
        const T* xr = x + r * n;
        T* yr = y + r * n;
        for (std::size_t j = 0; j < n; ++j) yr[j] = T(double(w[j]) * std::tanh(a * double(xr[j])) + double(b[j]));
    }
}

// With t = tanh(a x) recomputed and s = 1 - t^2 = dt/d(a x): dx = g w a s, and over every row
// d alpha += sum g w x s, dw += g t, db += g. Recomputing t costs one tanh per element; keeping
// it would hold a second input-sized array alive from forward to backward.
template <class T>
void dyt_backward(const T* x, const T* g, double a, const T* w, T* dx, double& dalpha, double* dw, double* db, std::size_t rows,
                  std::size_t width) {
    const std::size_t n = width;
    dalpha = 0.0;
    for (std::size_t r = 0; r < rows; ++r) {
        const T* xr = x + r * n;
        const T* gr = g + r * n;
        T* dxr = dx == nullptr ? nullptr : dx + r * n;
        dalpha += detail::row_sum(n, [=](std::size_t j) {
            const double t = std::tanh(a * double(xr[j]));
            const double dt = double(gr[j]) * double(w[j]) * (1.0 - t * t);  // dL/d(a x_j)
            if (dxr != nullptr) dxr[j] = T(dt * a);
            dw[j] += double(gr[j]) * t;
            db[j] += double(gr[j]);
            return dt * double(xr[j]);
        });
    }
}

XG_FOR_EACH_STORAGE_TYPE(XG_DYT_KERNELS)

}  // namespace xg::nn::fast
