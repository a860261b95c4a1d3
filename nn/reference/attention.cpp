// Self-attention on packed projections as plain loops: docs/derivations/attention.md.
#include "nn/reference/attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/engine/dtype.hpp"

namespace xg::nn::reference {

namespace {

// Where one (batch, head) pair's vectors live: q_i[d] = q(i, d), k_j[d] = k(j, d), v_j[d] = v(j, d)
// in the packed rows of 3E values; out_i[d] = o(i, d) in the rows of E values; its P(i, j).
struct Head {
    std::size_t b, h, L, H, D;
    std::size_t E() const { return H * D; }
    std::size_t row(std::size_t i) const { return (b * L + i) * 3 * E(); }
    std::size_t q(std::size_t i, std::size_t d) const { return row(i) + h * D + d; }
    std::size_t k(std::size_t j, std::size_t d) const { return row(j) + E() + h * D + d; }
    std::size_t v(std::size_t j, std::size_t d) const { return row(j) + 2 * E() + h * D + d; }
    std::size_t o(std::size_t i, std::size_t d) const { return (b * L + i) * E() + h * D + d; }
    std::size_t p(std::size_t i, std::size_t j) const { return ((b * H + h) * L + i) * L + j; }
};

}  // namespace

template <class T>
double self_attention_forward(const T* qkv, T* P, T* out, std::size_t B, std::size_t L, std::size_t H, std::size_t D,
                              double scale, bool causal) {
    double largest = -std::numeric_limits<double>::infinity();
    std::vector<double> s(L);
    for (std::size_t b = 0; b < B; ++b) {
        for (std::size_t h = 0; h < H; ++h) {
            const Head at{b, h, L, H, D};
            for (std::size_t i = 0; i < L; ++i) {
                const std::size_t keys = causal ? i + 1 : L;  // the keys j < keys that query i attends to
                double M = -std::numeric_limits<double>::infinity();
                for (std::size_t j = 0; j < keys; ++j) {
                    double dot = 0.0;  // q_i.k_j
                    for (std::size_t d = 0; d < D; ++d) dot += static_cast<double>(qkv[at.q(i, d)]) * qkv[at.k(j, d)];
                    s[j] = scale * dot;  // s_ij
                    M = std::max(M, s[j]);
                }
                largest = std::max(largest, M);
                double sum = 0.0;
                for (std::size_t j = 0; j < keys; ++j) {
                    s[j] = std::exp(s[j] - M);  // e^(s_ij - M): the shift keeps it <= 1
                    sum += s[j];
                }
                for (std::size_t j = 0; j < L; ++j) P[at.p(i, j)] = j < keys ? static_cast<T>(s[j] / sum) : T(0);  // P_ij
                for (std::size_t d = 0; d < D; ++d) {
                    double o = 0.0;  // sum_j P_ij v_j
                    for (std::size_t j = 0; j < L; ++j) o += static_cast<double>(P[at.p(i, j)]) * qkv[at.v(j, d)];
                    out[at.o(i, d)] = static_cast<T>(o);
                }
            }
        }
    }
    return largest;
}

template <class T>
void self_attention_backward(const T* qkv, const T* P, const T* g, T* dqkv, std::size_t B, std::size_t L, std::size_t H,
                             std::size_t D, double scale) {
    std::vector<double> dS(L * L);
    for (std::size_t b = 0; b < B; ++b) {
        for (std::size_t h = 0; h < H; ++h) {
            const Head at{b, h, L, H, D};
            for (std::size_t i = 0; i < L; ++i) {
                double dP_dot_P = 0.0;  // sum_j P_ij dP_ij
                for (std::size_t j = 0; j < L; ++j) {
                    double dP = 0.0;  // dP_ij = g_i.v_j
                    for (std::size_t d = 0; d < D; ++d) dP += static_cast<double>(g[at.o(i, d)]) * qkv[at.v(j, d)];
                    dS[i * L + j] = dP;
                    dP_dot_P += static_cast<double>(P[at.p(i, j)]) * dP;
                }
                for (std::size_t j = 0; j < L; ++j) dS[i * L + j] = P[at.p(i, j)] * (dS[i * L + j] - dP_dot_P);  // dS_ij
            }
            for (std::size_t i = 0; i < L; ++i) {
                for (std::size_t d = 0; d < D; ++d) {
                    double dq = 0.0, dk = 0.0, dv = 0.0;
                    for (std::size_t j = 0; j < L; ++j) {
                        dq += dS[i * L + j] * qkv[at.k(j, d)];                    // sum_j dS_ij k_j
                        dk += dS[j * L + i] * qkv[at.q(j, d)];                    // sum_j dS_ji q_j (row i as a key)
                        dv += static_cast<double>(P[at.p(j, i)]) * g[at.o(j, d)];  // sum_j P_ji g_j
                    }
                    dqkv[at.q(i, d)] = static_cast<T>(scale * dq);
                    dqkv[at.k(i, d)] = static_cast<T>(scale * dk);
                    dqkv[at.v(i, d)] = static_cast<T>(dv);
                }
            }
        }
    }
}

XG_FOR_EACH_STORAGE_TYPE(XG_ATTENTION_KERNELS)

}  // namespace xg::nn::reference
