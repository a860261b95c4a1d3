// softmax and log_softmax along one axis: docs/autograd.md, section 7. Each row is strided by
// `inner`; row(o, i)[j] below reads its j-th element. Every value is read as a double and every
// result stored once, so a float32 row is computed as the float64 row of the same values, rounded.
#include "core/reference/softmax.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace xg::reference {

namespace {

// The first element of row (o, i); the row's elements follow `inner` apart.
std::size_t row_start(std::size_t o, std::size_t i, std::size_t len, std::size_t inner) { return o * len * inner + i; }

// M = max_j x_j: the shift that keeps e^(x - M) <= 1 for logits of +-1000.
template <class T>
double row_max(const T* x, std::size_t len, std::size_t inner) {
    double M = -std::numeric_limits<double>::infinity();
    for (std::size_t j = 0; j < len; ++j) M = std::max(M, static_cast<double>(x[j * inner]));
    return M;
}

}  // namespace

template <class T>
void softmax_forward(const T* x, T* s, std::size_t outer, std::size_t len, std::size_t inner) {
    std::vector<double> e(len);  // the row's e^(x_j - M), kept in double until the division
    for (std::size_t o = 0; o < outer; ++o) {
        for (std::size_t i = 0; i < inner; ++i) {
            const std::size_t r = row_start(o, i, len, inner);
            const double M = row_max(x + r, len, inner);
            double sum = 0.0;
            for (std::size_t j = 0; j < len; ++j) {
                e[j] = std::exp(static_cast<double>(x[r + j * inner]) - M);  // e^(x_j - M)
                sum += e[j];
            }
            for (std::size_t j = 0; j < len; ++j) s[r + j * inner] = static_cast<T>(e[j] / sum);  // s_j = e^(x_j - M) / sum
        }
    }
}

template <class T>
void softmax_backward(const T* s, const T* g, T* dx, std::size_t outer, std::size_t len, std::size_t inner) {
    for (std::size_t o = 0; o < outer; ++o) {
        for (std::size_t i = 0; i < inner; ++i) {
            const std::size_t r = row_start(o, i, len, inner);
            double gs = 0.0;  // sum_i g_i s_i
            for (std::size_t j = 0; j < len; ++j) gs += static_cast<double>(g[r + j * inner]) * s[r + j * inner];
            for (std::size_t j = 0; j < len; ++j) {
                dx[r + j * inner] = static_cast<T>(static_cast<double>(s[r + j * inner]) * (g[r + j * inner] - gs));  // s_j (g_j - gs)
            }
        }
    }
}

template <class T>
void log_softmax_forward(const T* x, T* l, std::size_t outer, std::size_t len, std::size_t inner) {
    for (std::size_t o = 0; o < outer; ++o) {
        for (std::size_t i = 0; i < inner; ++i) {
            const std::size_t r = row_start(o, i, len, inner);
            const double M = row_max(x + r, len, inner);
            double sum = 0.0;
            for (std::size_t j = 0; j < len; ++j) sum += std::exp(static_cast<double>(x[r + j * inner]) - M);
            // (x_j - M) - log(sum), not x_j - (M + log(sum)), which rounds at the logits' magnitude
            const double log_sum = std::log(sum);
            for (std::size_t j = 0; j < len; ++j) l[r + j * inner] = static_cast<T>((static_cast<double>(x[r + j * inner]) - M) - log_sum);
        }
    }
}

template <class T>
void log_softmax_backward(const T* l, const T* g, T* dx, std::size_t outer, std::size_t len, std::size_t inner) {
    for (std::size_t o = 0; o < outer; ++o) {
        for (std::size_t i = 0; i < inner; ++i) {
            const std::size_t r = row_start(o, i, len, inner);
            double g_sum = 0.0;  // sum_i g_i
            for (std::size_t j = 0; j < len; ++j) g_sum += g[r + j * inner];
            for (std::size_t j = 0; j < len; ++j) {
                dx[r + j * inner] = static_cast<T>(g[r + j * inner] - std::exp(static_cast<double>(l[r + j * inner])) * g_sum);  // g_j - s_j sum g
            }
        }
    }
}

#define XG_SOFTMAX_KERNELS(T)                                                                                   \
    template void softmax_forward<T>(const T*, T*, std::size_t, std::size_t, std::size_t);                    \
    template void softmax_backward<T>(const T*, const T*, T*, std::size_t, std::size_t, std::size_t);         \
    template void log_softmax_forward<T>(const T*, T*, std::size_t, std::size_t, std::size_t);                \
    template void log_softmax_backward<T>(const T*, const T*, T*, std::size_t, std::size_t, std::size_t);
XG_FOR_EACH_STORAGE_TYPE(XG_SOFTMAX_KERNELS)
#undef XG_SOFTMAX_KERNELS

}  // namespace xg::reference
