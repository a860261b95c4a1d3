// BatchNorm with the symbols of docs/derivations/batchnorm.md. Channel c's M = N L values lie in N
// segments of L: value l of segment i is x[(i C + c) L + l]. The loops walk x in memory order (i, c,
// l) and keep one running sum per channel, so each channel's sum still adds its values in order.
#include "nn/reference/batch_norm.hpp"

#include <algorithm>
#include <vector>

namespace xg::nn::reference {

// mean_c = m_c + sum(d)/M, var_c = (sum(d^2) - sum(d)^2/M)/M with d = x - m_c, m_c = sum(x)/M: the
// corrected two-pass of docs/derivations/batchnorm.md, Numerics, with the whole batch as the shift
void batch_norm_stats(const double* x, double* mean, double* var, std::size_t N, std::size_t C, std::size_t L) {
    const double M = static_cast<double>(N * L);
    std::vector<double> m(C, 0.0), sum_d(C, 0.0), sum_d2(C, 0.0);
    for (std::size_t i = 0; i < N; ++i) {
        for (std::size_t c = 0; c < C; ++c) {
            for (std::size_t l = 0; l < L; ++l) m[c] += x[(i * C + c) * L + l];
        }
    }
    for (std::size_t c = 0; c < C; ++c) m[c] /= M;
    for (std::size_t i = 0; i < N; ++i) {
        for (std::size_t c = 0; c < C; ++c) {
            for (std::size_t l = 0; l < L; ++l) {
                const double d = x[(i * C + c) * L + l] - m[c];
                sum_d[c] += d;
                sum_d2[c] += d * d;
            }
        }
    }
    for (std::size_t c = 0; c < C; ++c) {
        mean[c] = m[c] + sum_d[c] / M;
        var[c] = std::max(0.0, (sum_d2[c] - sum_d[c] * sum_d[c] / M) / M);
    }
}

// y = xhat w_c + b_c,  xhat = (x - mean_c) rstd_c
void batch_norm_forward(const double* x, const double* w, const double* b, const double* mean, const double* rstd, double* y,
                        std::size_t N, std::size_t C, std::size_t L) {
    for (std::size_t i = 0; i < N; ++i) {
        for (std::size_t c = 0; c < C; ++c) {
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
    for (std::size_t i = 0; i < N; ++i) {
        for (std::size_t c = 0; c < C; ++c) {
            for (std::size_t l = 0; l < L; ++l) {
                const std::size_t k = (i * C + c) * L + l;
                const double xhat = (x[k] - mean[c]) * rstd[c];
                db[c] += g[k];
                dw[c] += g[k] * xhat;
            }
        }
    }
    if (dx == nullptr) return;
    const double M = static_cast<double>(N * L);
    std::vector<double> mean_g(C, 0.0), mean_g_xhat(C, 0.0);  // eval: the statistics are constants
    for (std::size_t c = 0; c < C && training; ++c) {
        mean_g[c] = db[c] / M;
        mean_g_xhat[c] = dw[c] / M;
    }
    batch_norm_input_grad(x, g, w, mean, rstd, mean_g.data(), mean_g_xhat.data(), dx, N, C, L);
}

// dx = w_c rstd_c (g - mean(g) - xhat mean(g xhat)), the means given
void batch_norm_input_grad(const double* x, const double* g, const double* w, const double* mean, const double* rstd,
                           const double* mean_g, const double* mean_g_xhat, double* dx, std::size_t N, std::size_t C,
                           std::size_t L) {
    for (std::size_t i = 0; i < N; ++i) {
        for (std::size_t c = 0; c < C; ++c) {
            for (std::size_t l = 0; l < L; ++l) {
                const std::size_t k = (i * C + c) * L + l;
                const double xhat = (x[k] - mean[c]) * rstd[c];
                dx[k] = w[c] * rstd[c] * (g[k] - mean_g[c] - xhat * mean_g_xhat[c]);
            }
        }
    }
}

}  // namespace xg::nn::reference
