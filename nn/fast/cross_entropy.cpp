#include "nn/fast/cross_entropy.hpp"

#include <algorithm>
#include <cmath>

namespace xg::nn::fast {

// loss_i = -(1 - ls) w_t log p_it - (ls / C) sum_j w_j log p_ij, p = softmax(x_i); one pass per
// row for the max, one for sum(exp), one for sum(w * log p): the loss needs only these.
void cross_entropy_forward(const double* x, const std::int64_t* targets, const double* weight, double label_smoothing,
                           std::int64_t ignore_index, std::size_t n, std::size_t classes, double* log_probs, double* per_row) {
    const bool weighted = weight != nullptr;
    const double smooth = label_smoothing / static_cast<double>(classes);
    for (std::size_t i = 0; i < n; ++i) {
        double* lp = log_probs + i * classes;
        if (targets[i] == ignore_index) {
            // Never read by backward; zeroed so the saved array holds no uninitialised memory.
            std::fill(lp, lp + classes, 0.0);
            per_row[i] = 0.0;
            continue;
        }
        const double* row = x + i * classes;
        double m = row[0];
        for (std::size_t j = 1; j < classes; ++j) m = std::max(m, row[j]);
        double sum_exp = 0.0;
#pragma omp simd reduction(+ : sum_exp)
        for (std::size_t j = 0; j < classes; ++j) sum_exp += std::exp(row[j] - m);
        // (x - m) - log(sum) rather than x - (m + log(sum)): at |x| ~ 1000 the rounded m + log(sum)
        // would cost ~1e-13 absolute in every log-probability (as in core log_softmax).
        const double log_sum = std::log(sum_exp);
        for (std::size_t j = 0; j < classes; ++j) lp[j] = (row[j] - m) - log_sum;
        // Without smoothing the term is absent, not 0 * sum: a masked (-inf) logit makes the sum
        // -inf, and 0 * -inf would turn the whole loss into NaN (PyTorch skips the term too).
        double smooth_sum = 0.0;
        if (label_smoothing > 0.0 && weighted) {
#pragma omp simd reduction(+ : smooth_sum)
            for (std::size_t j = 0; j < classes; ++j) smooth_sum += weight[j] * lp[j];
        } else if (label_smoothing > 0.0) {
#pragma omp simd reduction(+ : smooth_sum)
            for (std::size_t j = 0; j < classes; ++j) smooth_sum += lp[j];
        }
        const auto t = static_cast<std::size_t>(targets[i]);
        const double wt = weighted ? weight[t] : 1.0;
        const double smooth_term = label_smoothing > 0.0 ? smooth * smooth_sum : 0.0;
        per_row[i] = -(1.0 - label_smoothing) * wt * lp[t] - smooth_term;
    }
}

// gx_ij = up_i ((1 - ls) w_t (p_ij - [j == t]) + (ls / C) (p_ij sum_k w_k - w_j)), 0 on ignored
// rows; up_i is the upstream gradient of row i (already scaled for mean).
void cross_entropy_backward(const double* log_probs, const std::int64_t* targets, const double* weight, double label_smoothing,
                            std::int64_t ignore_index, const double* upstream, std::size_t rows, std::size_t cols, double* g) {
    const double smooth = label_smoothing / static_cast<double>(cols);
    double weight_sum = 0.0;  // sum_j w_j, which scales softmax in the smoothed gradient
    for (std::size_t j = 0; weight != nullptr && j < cols; ++j) weight_sum += weight[j];
    for (std::size_t i = 0; i < rows; ++i) {
        double* gi = g + i * cols;
        if (targets[i] == ignore_index) {
            std::fill(gi, gi + cols, 0.0);
            continue;
        }
        const double up = upstream[i];
        const double* lp = log_probs + i * cols;
        const auto t = static_cast<std::size_t>(targets[i]);
        if (weight == nullptr) {
            for (std::size_t j = 0; j < cols; ++j) gi[j] = up * (std::exp(lp[j]) - smooth);
            gi[t] -= up * (1.0 - label_smoothing);
        } else {
            const double p_coef = (1.0 - label_smoothing) * weight[t] + smooth * weight_sum;
            for (std::size_t j = 0; j < cols; ++j) gi[j] = up * (p_coef * std::exp(lp[j]) - smooth * weight[j]);
            gi[t] -= up * (1.0 - label_smoothing) * weight[t];
        }
    }
}

}  // namespace xg::nn::fast
