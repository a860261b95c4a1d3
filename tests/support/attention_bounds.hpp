// How far two computations of self-attention on the same packed projections may differ when each
// rounds with unit roundoff u (nn/functional/attention.hpp; docs/derivations/attention.md): the
// fast and the reference kernels, the fused node and its composed twin. First-order bounds, term
// by term, for one (batch, head) pair; s = scale q.k, P = softmax(s) over the keys a query attends
// to (all, or j <= i when causal; P_ij = 0 for the others, exactly, in both), out = P v, and in the
// backward dP = g v^T, c_i = sum_j P_ij dP_ij, dS = P (dP - c), dq = scale dS k, dk = scale dS^T q,
// dv = P^T g. Each computation:
//  - a score: a sum of D products, scaled and stored: within (D + 1) u scale sum_d |q_d k_d|, plus
//    u |s| when stored in the storage type: sigma_ij = (2D + 3) u scale sum_d |q_id k_jd| between two;
//  - softmax: s - M rounds (u |s - M| in the exponent), exp, an L-term sum and the division,
//    (L + 4) u relative: a weight moves by at most pi_ij = P_ij (sigma_ij + max_j' sigma_ij' +
//    2 (L + 4) u + 2 u |s_ij - M_i| + 2 u max_j' |s_ij' - M_i|);
//  - out = sum_j P_ij v_j: the weights' pi plus 2 (L + 1) u sum_j P_ij |v_jd| for the two sums;
//  - dP: (2D + 3) u sum_d |g_id v_jd| (rho); c_i: kappa_i = sum_j (pi_ij |dP_ij| + P_ij rho_ij) +
//    2 (L + 1) u sum_j P_ij |dP_ij|; dS: eps_ij = pi_ij |dP_ij - c_i| + P_ij (rho_ij + kappa_i) + 6 u |dS_ij|;
//  - dq_i = scale sum_j: scale (sum_j eps_ij |k_j| + 2 (L + 2) u sum_j |dS_ij| |k_j|), dk likewise
//    with q, dv_j = sum_i pi_ij |g_i| + 2 (L + 1) u sum_i P_ij |g_i|.
// The values (P, dP, dS) are taken from a float64 evaluation; second-order terms are left out.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "core/engine/tensor.hpp"

namespace xg::test {

struct AttentionBounds {
    Array out, dqkv;  // tolerances, shaped as the output (B, L, E) and qkv (B, L, 3E)
    double max_logit = 0.0;  // the largest sigma: the maximum of the scores moves by no more
};

inline AttentionBounds self_attention_bounds(const Array& qkv, const Array& g, std::size_t H, double u, bool causal = false) {
    const std::size_t B = qkv.shape()[0], L = qkv.shape()[1], E = qkv.shape()[2] / 3, D = E / H;
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    AttentionBounds t{xt::zeros<double>({B, L, E}), xt::zeros<double>(qkv.shape())};
    const auto q = [&](std::size_t b, std::size_t i, std::size_t h, std::size_t d) { return qkv(b, i, h * D + d); };
    const auto k = [&](std::size_t b, std::size_t j, std::size_t h, std::size_t d) { return qkv(b, j, E + h * D + d); };
    const auto v = [&](std::size_t b, std::size_t j, std::size_t h, std::size_t d) { return qkv(b, j, 2 * E + h * D + d); };
    std::vector<double> P(L * L), pi(L * L), dP(L * L), rho(L * L), dS(L * L), eps(L * L);
    for (std::size_t b = 0; b < B; ++b) {
        for (std::size_t h = 0; h < H; ++h) {
            for (std::size_t i = 0; i < L; ++i) {
                const std::size_t keys = causal ? i + 1 : L;  // the keys j < keys that query i attends to
                std::vector<double> s(L), sigma(L);
                double M = -INFINITY, sum = 0.0, sigma_max = 0.0, shift_max = 0.0;
                for (std::size_t j = 0; j < keys; ++j) {
                    double dot = 0.0, abs_dot = 0.0;
                    for (std::size_t d = 0; d < D; ++d) dot += q(b, i, h, d) * k(b, j, h, d), abs_dot += std::fabs(q(b, i, h, d) * k(b, j, h, d));
                    s[j] = scale * dot;
                    sigma[j] = (2.0 * D + 3) * u * scale * abs_dot;
                    M = std::max(M, s[j]), sigma_max = std::max(sigma_max, sigma[j]);
                    t.max_logit = std::max(t.max_logit, sigma[j]);
                }
                for (std::size_t j = 0; j < keys; ++j) sum += std::exp(s[j] - M), shift_max = std::max(shift_max, s[j] - M < 0 ? M - s[j] : s[j] - M);
                for (std::size_t j = 0; j < L; ++j) {
                    P[i * L + j] = j < keys ? std::exp(s[j] - M) / sum : 0.0;
                    pi[i * L + j] = j < keys ? P[i * L + j] * (sigma[j] + sigma_max + 2.0 * (L + 4) * u + 2 * u * std::fabs(s[j] - M) + 2 * u * shift_max) : 0.0;
                }
                double c = 0.0, kappa = 0.0, abs_c = 0.0;
                for (std::size_t j = 0; j < L; ++j) {
                    double dot = 0.0, abs_dot = 0.0;
                    for (std::size_t d = 0; d < D; ++d) dot += g(b, i, h * D + d) * v(b, j, h, d), abs_dot += std::fabs(g(b, i, h * D + d) * v(b, j, h, d));
                    dP[i * L + j] = dot;
                    rho[i * L + j] = (2.0 * D + 3) * u * abs_dot;
                    c += P[i * L + j] * dot;
                    abs_c += P[i * L + j] * std::fabs(dot);
                    kappa += pi[i * L + j] * std::fabs(dot) + P[i * L + j] * rho[i * L + j];
                }
                kappa += 2.0 * (L + 1) * u * abs_c;
                for (std::size_t j = 0; j < L; ++j) {
                    dS[i * L + j] = P[i * L + j] * (dP[i * L + j] - c);
                    eps[i * L + j] = pi[i * L + j] * std::fabs(dP[i * L + j] - c) + P[i * L + j] * (rho[i * L + j] + kappa) +
                                     6 * u * std::fabs(dS[i * L + j]);
                }
                for (std::size_t d = 0; d < D; ++d) {
                    double tol = 0.0;
                    for (std::size_t j = 0; j < L; ++j) tol += pi[i * L + j] * std::fabs(v(b, j, h, d)) + 2.0 * (L + 1) * u * P[i * L + j] * std::fabs(v(b, j, h, d));
                    t.out(b, i, h * D + d) = tol;
                }
            }
            for (std::size_t i = 0; i < L; ++i) {  // i as a query (dq) and as a key or value (dk, dv)
                for (std::size_t d = 0; d < D; ++d) {
                    double dq = 0.0, dk = 0.0, dv = 0.0;
                    for (std::size_t j = 0; j < L; ++j) {
                        dq += eps[i * L + j] * std::fabs(k(b, j, h, d)) + 2.0 * (L + 2) * u * std::fabs(dS[i * L + j] * k(b, j, h, d));
                        dk += eps[j * L + i] * std::fabs(q(b, j, h, d)) + 2.0 * (L + 2) * u * std::fabs(dS[j * L + i] * q(b, j, h, d));
                        dv += pi[j * L + i] * std::fabs(g(b, j, h * D + d)) + 2.0 * (L + 1) * u * P[j * L + i] * std::fabs(g(b, j, h * D + d));
                    }
                    t.dqkv(b, i, h * D + d) = scale * dq;
                    t.dqkv(b, i, E + h * D + d) = scale * dk;
                    t.dqkv(b, i, 2 * E + h * D + d) = dv;
                }
            }
        }
    }
    return t;
}

}  // namespace xg::test
