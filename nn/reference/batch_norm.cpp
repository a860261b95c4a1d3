// BatchNorm, one channel at a time, with the symbols of docs/derivations/batchnorm.md. Channel c's
// M = N L values lie in N segments of L: value l of segment i is x[(i C + c) L + l].
#include "nn/reference/batch_norm.hpp"

#include <algorithm>
#include <vector>

namespace xg::nn::reference {

// mean_c = m + sum(d)/M, var_c = (sum(d^2) - sum(d)^2/M)/M with d = x - m, m = sum(x)/M: the
// corrected two-pass of docs/derivations/batchnorm.md, Numerics, with the whole batch as the shift
void batch_norm_stats(const double* x, double* mean, double* var, std::size_t N, std::size_t C, std::size_t L) {
    const double M = static_cast<double>(N * L);
    for (std::size_t c = 0; c < C; ++c) {
        double m = 0.0;
        for (std::size_t i = 0; i < N; ++i) {
            for (std::size_t l = 0; l < L; ++l) m += x[(i * C + c) * L + l];
        }
        m /= M;
        double sum_d = 0.0, sum_d2 = 0.0;
        for (std::size_t i = 0; i < N; ++i) {
            for (std::size_t l = 0; l < L; ++l) {
                const double d = x[(i * C + c) * L + l] - m;
                sum_d += d;
                sum_d2 += d * d;
            }
        }
        mean[c] = m + sum_d / M;
        var[c] = std::max(0.0, (sum_d2 - sum_d * sum_d / M) / M);
    }
}

// y = xhat w_c + b_c,  xhat = (x - mean_c) rstd_c
void batch_norm_forward(const double* x, const double* w, const double* b, const double* mean, const double* rstd, double* y,
                        std::size_t N, std::size_t C, std::size_t L) {
    for (std::size_t c = 0; c < C; ++c) {
        for (std::size_t i = 0; i < N; ++i) {
            for (std::size_t l = 0; l < L; ++l) {
                const std::size_t k = (i * C + c) * L + l;
                const double xhat = (x[k] - mean[c]) * rstd[c];
                y[k] = xhat * w[c] + b[c];
            }
        }
    }
}

// training: dx = w_c rstd_c (g - mean(g) - xhat mean(g xhat));  eval: dx = w_c rstd_c g;
// dw_c = sum g xhat,  db_c = sum g
void batch_norm_backward(const double* x, const double* g, const double* w, const double* mean, const double* rstd, double* dx,
                         double* dw, double* db, std::size_t N, std::size_t C, std::size_t L, bool training) {
    const double M = static_cast<double>(N * L);
    std::vector<double> mean_g(C), mean_g_xhat(C);  // training: through the statistics; eval: constants
    for (std::size_t c = 0; c < C; ++c) {
        double sum_g = 0.0, sum_g_xhat = 0.0;
        for (std::size_t i = 0; i < N; ++i) {
            for (std::size_t l = 0; l < L; ++l) {
                const std::size_t k = (i * C + c) * L + l;
                sum_g += g[k];
                sum_g_xhat += g[k] * (x[k] - mean[c]) * rstd[c];
            }
        }
        db[c] += sum_g;
        dw[c] += sum_g_xhat;
        mean_g[c] = training ? sum_g / M : 0.0;
        mean_g_xhat[c] = training ? sum_g_xhat / M : 0.0;
    }
    if (dx != nullptr) batch_norm_input_grad(x, g, w, mean, rstd, mean_g.data(), mean_g_xhat.data(), dx, N, C, L);
}

// dx = w_c rstd_c (g - mean(g) - xhat mean(g xhat)), the means given
void batch_norm_input_grad(const double* x, const double* g, const double* w, const double* mean, const double* rstd,
                           const double* mean_g, const double* mean_g_xhat, double* dx, std::size_t N, std::size_t C,
                           std::size_t L) {
    for (std::size_t c = 0; c < C; ++c) {
        for (std::size_t i = 0; i < N; ++i) {
            for (std::size_t l = 0; l < L; ++l) {
                const std::size_t k = (i * C + c) * L + l;
                const double xhat = (x[k] - mean[c]) * rstd[c];
                dx[k] = w[c] * rstd[c] * (g[k] - mean_g[c] - xhat * mean_g_xhat[c]);
            }
        }
    }
}

}  // namespace xg::nn::reference
