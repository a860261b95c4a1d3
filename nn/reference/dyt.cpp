// DyT, y = w tanh(a x) + b: docs/derivations/dyt.md, one loop per formula.
#include "nn/reference/dyt.hpp"

#include <cmath>

namespace xg::nn::reference {

void dyt_forward(const double* x, double a, const double* w, const double* b, double* y, std::size_t rows, std::size_t width) {
    for (std::size_t r = 0; r < rows; ++r) {
        for (std::size_t j = 0; j < width; ++j) {
            const std::size_t k = r * width + j;
            y[k] = w[j] * std::tanh(a * x[k]) + b[j];  // y_j = w_j t_j + b_j, t_j = tanh(a x_j)
        }
    }
}

void dyt_backward(const double* x, const double* g, double a, const double* w, double* dx, double& da, double* dw, double* db,
                  std::size_t rows, std::size_t width) {
    da = 0.0;
    for (std::size_t r = 0; r < rows; ++r) {
        for (std::size_t j = 0; j < width; ++j) {
            const std::size_t k = r * width + j;
            const double t = std::tanh(a * x[k]);
            const double s = 1.0 - t * t;       // s_j = tanh'(a x_j)
            const double dt = g[k] * w[j] * s;  // dt_j = g_j w_j s_j = dL/d(a x_j)
            if (dx != nullptr) dx[k] = dt * a;  // dL/dx_j = dt_j a
            da += dt * x[k];                    // dL/da = sum over all elements of dt_j x_j
            dw[j] += g[k] * t;                  // dL/dw_j = sum over rows of g_j t_j
            db[j] += g[k];                      // dL/db_j = sum over rows of g_j
        }
    }
}

}  // namespace xg::nn::reference
