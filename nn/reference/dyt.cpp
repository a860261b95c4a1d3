// DyT, y = w tanh(a x) + b: docs/derivations/dyt.md, one loop per formula. Every value read is
// widened to double and each result rounded once into T (docs/precision.md, "Accumulators").
#include "nn/reference/dyt.hpp"

#include <cmath>

#include "core/engine/dtype.hpp"

namespace xg::nn::reference {

template <class T>
void dyt_forward(const T* x, double a, const T* w, const T* b, T* y, std::size_t rows, std::size_t width) {
    for (std::size_t r = 0; r < rows; ++r) {
        for (std::size_t j = 0; j < width; ++j) {
            const std::size_t k = r * width + j;
            y[k] = T(double(w[j]) * std::tanh(a * double(x[k])) + double(b[j]));  // y_j = w_j t_j + b_j, t_j = tanh(a x_j)
        }
    }
}

template <class T>
void dyt_backward(const T* x, const T* g, double a, const T* w, T* dx, double& da, double* dw, double* db, std::size_t rows,
                  std::size_t width) {
    da = 0.0;
    for (std::size_t r = 0; r < rows; ++r) {
        for (std::size_t j = 0; j < width; ++j) {
            const std::size_t k = r * width + j;
            const double t = std::tanh(a * double(x[k]));
            const double s = 1.0 - t * t;                    // s_j = tanh'(a x_j)
            const double dt = double(g[k]) * double(w[j]) * s;  // dt_j = g_j w_j s_j = dL/d(a x_j)
            if (dx != nullptr) dx[k] = T(dt * a);            // dL/dx_j = dt_j a
            da += dt * double(x[k]);                         // dL/da = sum over all elements of dt_j x_j
            dw[j] += double(g[k]) * t;                       // dL/dw_j = sum over rows of g_j t_j
            db[j] += double(g[k]);                           // dL/db_j = sum over rows of g_j
        }
    }
}

XG_FOR_EACH_STORAGE_TYPE(XG_DYT_KERNELS)

}  // namespace xg::nn::reference
