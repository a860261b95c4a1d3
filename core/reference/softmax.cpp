// softmax and log_softmax along one axis: docs/autograd.md, section 7. Each row is strided by
// `inner`; row(o, i)[j] below reads its j-th element.
#include "core/reference/softmax.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace xg::reference {

namespace {

// The first element of row (o, i); the row's elements follow `inner` apart.
std::size_t row_start(std::size_t o, std::size_t i, std::size_t len, std::size_t inner) { return o * len * inner + i; }

// M = max_j x_j: the shift that keeps e^(x - M) <= 1 for logits of +-1000.
double row_max(const double* x, std::size_t len, std::size_t inner) {
    double M = -std::numeric_limits<double>::infinity();
    for (std::size_t j = 0; j < len; ++j) M = std::max(M, x[j * inner]);
    return M;
}

}  // namespace

void softmax_forward(const double* x, double* s, std::size_t outer, std::size_t len, std::size_t inner) {
    for (std::size_t o = 0; o < outer; ++o) {
        for (std::size_t i = 0; i < inner; ++i) {
            const std::size_t r = row_start(o, i, len, inner);
            const double M = row_max(x + r, len, inner);
            double sum = 0.0;
            for (std::size_t j = 0; j < len; ++j) {
                s[r + j * inner] = std::exp(x[r + j * inner] - M);  // e^(x_j - M)
                sum += s[r + j * inner];
            }
            for (std::size_t j = 0; j < len; ++j) s[r + j * inner] /= sum;  // s_j = e^(x_j - M) / sum
        }
    }
}

void softmax_backward(const double* s, const double* g, double* dx, std::size_t outer, std::size_t len, std::size_t inner) {
    for (std::size_t o = 0; o < outer; ++o) {
        for (std::size_t i = 0; i < inner; ++i) {
            const std::size_t r = row_start(o, i, len, inner);
            double gs = 0.0;  // sum_i g_i s_i
            for (std::size_t j = 0; j < len; ++j) gs += g[r + j * inner] * s[r + j * inner];
            for (std::size_t j = 0; j < len; ++j) dx[r + j * inner] = s[r + j * inner] * (g[r + j * inner] - gs);  // s_j (g_j - gs)
        }
    }
}

void log_softmax_forward(const double* x, double* l, std::size_t outer, std::size_t len, std::size_t inner) {
    for (std::size_t o = 0; o < outer; ++o) {
        for (std::size_t i = 0; i < inner; ++i) {
            const std::size_t r = row_start(o, i, len, inner);
            const double M = row_max(x + r, len, inner);
            double sum = 0.0;
            for (std::size_t j = 0; j < len; ++j) sum += std::exp(x[r + j * inner] - M);
            // (x_j - M) - log(sum), not x_j - (M + log(sum)), which rounds at the logits' magnitude
            const double log_sum = std::log(sum);
            for (std::size_t j = 0; j < len; ++j) l[r + j * inner] = (x[r + j * inner] - M) - log_sum;
        }
    }
}

void log_softmax_backward(const double* l, const double* g, double* dx, std::size_t outer, std::size_t len, std::size_t inner) {
    for (std::size_t o = 0; o < outer; ++o) {
        for (std::size_t i = 0; i < inner; ++i) {
            const std::size_t r = row_start(o, i, len, inner);
            double g_sum = 0.0;  // sum_i g_i
            for (std::size_t j = 0; j < len; ++j) g_sum += g[r + j * inner];
            for (std::size_t j = 0; j < len; ++j) dx[r + j * inner] = g[r + j * inner] - std::exp(l[r + j * inner]) * g_sum;  // g_j - s_j sum g
        }
    }
}

}  // namespace xg::reference
