// Multi-head attention written out element by element, independent of MultiheadAttention's
// reshapes, permutes and matmuls: what the module's output and weights are checked against.
#pragma once

#include <cmath>
#include <limits>
#include <vector>

#include "core/engine/tensor.hpp"

namespace xg::test {

/// softmax(q k^T / sqrt(D)) per head, with q, k from the packed projection w (3E, E), b (3E) of
/// xq (B, T, E) and xkv (B, S, E); `mask` (T, S) true = not attended. Shape (B, heads, T, S).
inline Array attention_weights_reference(const Array& xq, const Array& xkv, const Array& w, const Array& b,
                                         std::size_t heads, const Mask* mask) {
    const std::size_t B = xq.shape()[0], T = xq.shape()[1], S = xkv.shape()[1], E = xq.shape()[2], D = E / heads;
    auto project = [&](const Array& x, std::size_t part, std::size_t bi, std::size_t t, std::size_t i) {
        double acc = b(part * E + i);
        for (std::size_t j = 0; j < E; ++j) acc += w(part * E + i, j) * x(bi, t, j);
        return acc;
    };
    Array out = Array::from_shape({B, heads, T, S});
    for (std::size_t bi = 0; bi < B; ++bi) {
        for (std::size_t h = 0; h < heads; ++h) {
            for (std::size_t t = 0; t < T; ++t) {
                std::vector<double> score(S, -std::numeric_limits<double>::infinity());
                double top = -std::numeric_limits<double>::infinity();
                for (std::size_t s = 0; s < S; ++s) {
                    if (mask && (*mask)(t, s)) continue;
                    double dot = 0.0;
                    for (std::size_t d = 0; d < D; ++d) dot += project(xq, 0, bi, t, h * D + d) * project(xkv, 1, bi, s, h * D + d);
                    score[s] = dot / std::sqrt(static_cast<double>(D));
                    top = std::max(top, score[s]);
                }
                double total = 0.0;
                for (double& sc : score) total += (sc = std::exp(sc - top));
                for (std::size_t s = 0; s < S; ++s) out(bi, h, t, s) = score[s] / total;
            }
        }
    }
    return out;
}

/// The module's output: those weights times the projected values (v from w, b), heads merged,
/// then the output projection wo (E, E), bo (E). Shape (B, T, E).
inline Array attention_reference(const Array& xq, const Array& xkv, const Array& w, const Array& b, const Array& wo,
                                 const Array& bo, std::size_t heads, const Mask* mask) {
    const std::size_t B = xq.shape()[0], T = xq.shape()[1], S = xkv.shape()[1], E = xq.shape()[2], D = E / heads;
    const Array weights = attention_weights_reference(xq, xkv, w, b, heads, mask);
    Array ctx = Array::from_shape({B, T, E});
    for (std::size_t bi = 0; bi < B; ++bi) {
        for (std::size_t h = 0; h < heads; ++h) {
            for (std::size_t t = 0; t < T; ++t) {
                for (std::size_t d = 0; d < D; ++d) {
                    double acc = 0.0;
                    for (std::size_t s = 0; s < S; ++s) {
                        double v = b(2 * E + h * D + d);
                        for (std::size_t j = 0; j < E; ++j) v += w(2 * E + h * D + d, j) * xkv(bi, s, j);
                        acc += weights(bi, h, t, s) * v;
                    }
                    ctx(bi, t, h * D + d) = acc;
                }
            }
        }
    }
    Array out = Array::from_shape({B, T, E});
    for (std::size_t bi = 0; bi < B; ++bi) {
        for (std::size_t t = 0; t < T; ++t) {
            for (std::size_t i = 0; i < E; ++i) {
                double acc = bo(i);
                for (std::size_t j = 0; j < E; ++j) acc += wo(i, j) * ctx(bi, t, j);
                out(bi, t, i) = acc;
            }
        }
    }
    return out;
}

}  // namespace xg::test
