// conv2d as the sum it is (docs/derivations/conv2d.md, "Forward"), and its backward as the same
// loops read backwards: each product W[o, c, i, j] x[n, c, r, q] in y sends g W to dx and g x to dW.
// The fast tier computes the same sums as one GEMM per sample and group (im2col); these loops are
// ~6x slower (docs/performance.md) and much shorter.
#include "nn/reference/conv.hpp"

namespace xg::nn::reference {

namespace {

// Calls f(y index, x index, W index) for every product W[o, c, i, j] x[n, c, r, q] of the sum of
// y[n, o, oh, ow] whose input position (r, q) lies inside the image (the padding reads 0).
template <class F>
void for_each_product(const detail::ConvDims& d, std::size_t n, std::size_t o, std::size_t oh, std::size_t ow, F&& f) {
    const detail::Window2d& win = d.win;
    const std::size_t g = o / d.Og;  // o's group
    for (std::size_t c = 0; c < d.Cg; ++c) {
        const std::size_t x_channel = g * d.Cg + c;
        for (std::size_t i = 0; i < win.kh; ++i) {
            for (std::size_t j = 0; j < win.kw; ++j) {
                const long r = win.row(oh, i), q = win.col(ow, j);  // r = oh s_h - p_h + i d_h, q likewise
                if (!win.inside(r, q)) continue;
                const std::size_t xk = ((n * d.C + x_channel) * win.H + static_cast<std::size_t>(r)) * win.W + static_cast<std::size_t>(q);
                const std::size_t wk = ((o * d.Cg + c) * win.kh + i) * win.kw + j;
                f(xk, wk);
            }
        }
    }
}

}  // namespace

void conv2d_forward(const double* x, const double* w, const double* b, double* y, const detail::ConvDims& d) {
    for (std::size_t n = 0; n < d.N; ++n) {
        for (std::size_t o = 0; o < d.O; ++o) {
            for (std::size_t oh = 0; oh < d.win.OH; ++oh) {
                for (std::size_t ow = 0; ow < d.win.OW; ++ow) {
                    double sum = b == nullptr ? 0.0 : b[o];  // y = b_o + sum W x
                    for_each_product(d, n, o, oh, ow, [&](std::size_t xk, std::size_t wk) { sum += w[wk] * x[xk]; });
                    y[((n * d.O + o) * d.win.OH + oh) * d.win.OW + ow] = sum;
                }
            }
        }
    }
}

void conv2d_backward(const double* x, const double* w, const double* g, double* dx, double* dw, double* db,
                     const detail::ConvDims& d) {
    for (std::size_t n = 0; n < d.N; ++n) {
        for (std::size_t o = 0; o < d.O; ++o) {
            for (std::size_t oh = 0; oh < d.win.OH; ++oh) {
                for (std::size_t ow = 0; ow < d.win.OW; ++ow) {
                    const double gy = g[((n * d.O + o) * d.win.OH + oh) * d.win.OW + ow];
                    if (db != nullptr) db[o] += gy;  // dL/db_o = sum g
                    for_each_product(d, n, o, oh, ow, [&](std::size_t xk, std::size_t wk) {
                        if (dx != nullptr) dx[xk] += w[wk] * gy;  // dL/dx[n, c, r, q] += W[o, c, i, j] g
                        if (dw != nullptr) dw[wk] += x[xk] * gy;  // dL/dW[o, c, i, j] += x[n, c, r, q] g
                    });
                }
            }
        }
    }
}

}  // namespace xg::nn::reference
