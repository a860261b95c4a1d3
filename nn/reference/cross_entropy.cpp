// Cross-entropy with class weights, ignore_index and label smoothing: docs/derivations/losses.md.
#include "nn/reference/cross_entropy.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace xg::nn::reference {

namespace {

double weight_of(const double* w, std::size_t j) { return w == nullptr ? 1.0 : w[j]; }

}  // namespace

void cross_entropy_forward(const double* z, const std::int64_t* t, const double* w, double s, std::int64_t ignore_index,
                           std::size_t n, std::size_t C, double* l, double* loss) {
    for (std::size_t r = 0; r < n; ++r) {
        const double* zr = z + r * C;
        double* lr = l + r * C;
        if (t[r] == ignore_index) {
            std::fill(lr, lr + C, 0.0);
            loss[r] = 0.0;
            continue;
        }
        double M = -std::numeric_limits<double>::infinity();  // the row maximum
        for (std::size_t j = 0; j < C; ++j) M = std::max(M, zr[j]);
        double sum = 0.0;
        for (std::size_t j = 0; j < C; ++j) sum += std::exp(zr[j] - M);
        const double log_sum = std::log(sum);
        for (std::size_t j = 0; j < C; ++j) lr[j] = (zr[j] - M) - log_sum;  // l_j = log_softmax(z)_j
        const auto target = static_cast<std::size_t>(t[r]);
        loss[r] = -(1.0 - s) * weight_of(w, target) * lr[target];  // -(1 - s) w[t] l[t]
        // - (s / C) sum_j w_j l_j; left out when s = 0, where a -inf logit would make it 0 * -inf
        if (s > 0.0) {
            double smoothed = 0.0;
            for (std::size_t j = 0; j < C; ++j) smoothed += weight_of(w, j) * lr[j];
            loss[r] -= s / static_cast<double>(C) * smoothed;
        }
    }
}

void cross_entropy_backward(const double* l, const std::int64_t* t, const double* w, double s, std::int64_t ignore_index,
                            const double* g, std::size_t n, std::size_t C, double* dz) {
    double w_sum = 0.0;  // sum_k w_k
    for (std::size_t k = 0; k < C; ++k) w_sum += weight_of(w, k);
    for (std::size_t r = 0; r < n; ++r) {
        const double* lr = l + r * C;
        double* dzr = dz + r * C;
        if (t[r] == ignore_index) {
            std::fill(dzr, dzr + C, 0.0);
            continue;
        }
        const auto target = static_cast<std::size_t>(t[r]);
        const double w_t = weight_of(w, target);
        const double p_coef = (1.0 - s) * w_t + s / static_cast<double>(C) * w_sum;  // (1 - s) w[t] + (s / C) sum_k w_k
        for (std::size_t j = 0; j < C; ++j) {
            const double onehot = j == target ? 1.0 : 0.0;
            // dz_j = g (p_coef p_j - (1 - s) w[t] [j = t] - (s / C) w_j)
            dzr[j] = g[r] * (p_coef * std::exp(lr[j]) - (1.0 - s) * w_t * onehot - s / static_cast<double>(C) * weight_of(w, j));
        }
    }
}

}  // namespace xg::nn::reference
