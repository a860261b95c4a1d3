// BatchNorm with the symbols of docs/derivations/batchnorm.md. Channel c's M = N L values lie in N
// segments of L: value l of segment i is x[(i C + c) L + l]. The loops walk x in memory order (i, c,
// l) and keep one running sum per channel, so each channel's sum still adds its values in order.
// Every value read is widened to double and only y and dx are rounded to T (a float32 op = float32
// storage + float64 arithmetic between stores; why not float sums: docs/precision.md, "Accumulators").
#include "nn/reference/batch_norm.hpp"

#include <algorithm>
#include <vector>

#include "core/engine/dtype.hpp"

namespace xg::nn::reference {

// mean_c = m_c + sum(d)/M, var_c = (sum(d^2) - sum(d)^2/M)/M with d = x - m_c, m_c = sum(x)/M: the
// corrected two-pass of docs/derivations/batchnorm.md, Numerics, with the whole batch as the shift
template <class T>
void batch_norm_stats(const T* x, double* mean, double* var, std::size_t N, std::size_t C, std::size_t L) {
    const double M = static_cast<double>(N * L);
    std::vector<double> m(C, 0.0), sum_d(C, 0.0), sum_d2(C, 0.0);
    for (std::size_t i = 0; i < N; ++i) {
        for (std::size_t c = 0; c < C; ++c) {
            for (std::size_t l = 0; l < L; ++l) m[c] += double(x[(i * C + c) * L + l]);
        }
    }
    for (std::size_t c = 0; c < C; ++c) m[c] /= M;
    for (std::size_t i = 0; i < N; ++i) {
        for (std::size_t c = 0; c < C; ++c) {
            for (std::size_t l = 0; l < L; ++l) {
                const double d = double(x[(i * C + c) * L + l]) - m[c];
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
template <class T>
void batch_norm_forward(const T* x, const T* w, const T* b, const double* mean, const double* rstd, T* y, std::size_t N,
                        std::size_t C, std::size_t L) {
    for (std::size_t i = 0; i < N; ++i) {
        for (std::size_t c = 0; c < C; ++c) {
            for (std::size_t l = 0; l < L; ++l) {
                const std::size_t k = (i * C + c) * L + l;
                const double xhat = (double(x[k]) - mean[c]) * rstd[c];
                y[k] = T(xhat * double(w[c]) + double(b[c]));
            }
        }
    }
}

// training: dx = w_c rstd_c (g - mean(g) - xhat mean(g xhat));  eval: dx = w_c rstd_c g;
// dw_c = sum g xhat,  db_c = sum g (double whatever T)
template <class T>
void batch_norm_backward(const T* x, const T* g, const T* w, const double* mean, const double* rstd, T* dx, double* dw, double* db,
                         std::size_t N, std::size_t C, std::size_t L, bool training) {
    for (std::size_t i = 0; i < N; ++i) {
        for (std::size_t c = 0; c < C; ++c) {
            for (std::size_t l = 0; l < L; ++l) {
                const std::size_t k = (i * C + c) * L + l;
                const double xhat = (double(x[k]) - mean[c]) * rstd[c];
                db[c] += double(g[k]);
                dw[c] += double(g[k]) * xhat;
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
template <class T>
void batch_norm_input_grad(const T* x, const T* g, const T* w, const double* mean, const double* rstd, const double* mean_g,
                           const double* mean_g_xhat, T* dx, std::size_t N, std::size_t C, std::size_t L) {
    for (std::size_t i = 0; i < N; ++i) {
        for (std::size_t c = 0; c < C; ++c) {
            for (std::size_t l = 0; l < L; ++l) {
                const std::size_t k = (i * C + c) * L + l;
                const double xhat = (double(x[k]) - mean[c]) * rstd[c];
                dx[k] = T(double(w[c]) * rstd[c] * (double(g[k]) - mean_g[c] - xhat * mean_g_xhat[c]));
            }
        }
    }
}

XG_FOR_EACH_STORAGE_TYPE(XG_BATCH_NORM_KERNELS)

}  // namespace xg::nn::reference
