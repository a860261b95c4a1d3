// conv2d as the sum it is (docs/derivations/conv2d.md, "Forward"), and its backward as the same
// loops read backwards: each product W[o, c, i, j] x[n, c, r, q] in y sends g W to dx and g x to dW.
// The loops run over one weight W[o, c, i, j] at a time and the whole output plane under it, so
// every y still adds its products in the order (c, i, j). The fast tier computes the same sums as
// one GEMM per sample and group (im2col).
#include "nn/reference/conv.hpp"

namespace xg::nn::reference {

namespace {

// Calls f(k, xk) for every output position k = oh OW + ow of a plane whose input position
// (r, q) = (oh s_h - p_h + i d_h, ow s_w - p_w + j d_w) under kernel tap (i, j) lies inside the
// image, with xk = r W + q its place in an input plane (the padding reads 0: it adds nothing).
template <class F>
void for_each_position(const detail::Window2d& win, std::size_t i, std::size_t j, F&& f) {
    for (std::size_t oh = 0; oh < win.OH; ++oh) {
        const long r = win.row(oh, i);
        if (r < 0 || r >= static_cast<long>(win.H)) continue;  // a row of the padding
        for (std::size_t ow = 0; ow < win.OW; ++ow) {
            const long q = win.col(ow, j);
            if (!win.inside(r, q)) continue;
            f(oh * win.OW + ow, static_cast<std::size_t>(r) * win.W + static_cast<std::size_t>(q));
        }
    }
}

}  // namespace

void conv2d_forward(const double* x, const double* w, const double* b, double* y, const detail::ConvDims& d) {
    const detail::Window2d& win = d.win;
    for (std::size_t n = 0; n < d.N; ++n) {
        for (std::size_t o = 0; o < d.O; ++o) {
            double* y_no = y + (n * d.O + o) * win.out_area();
            for (std::size_t k = 0; k < win.out_area(); ++k) y_no[k] = b == nullptr ? 0.0 : b[o];  // y = b_o + sum W x
            const std::size_t g = o / d.Og;  // o's group
            for (std::size_t c = 0; c < d.Cg; ++c) {
                const double* x_nc = x + (n * d.C + g * d.Cg + c) * win.H * win.W;
                for (std::size_t i = 0; i < win.kh; ++i) {
                    for (std::size_t j = 0; j < win.kw; ++j) {
                        const double w_ocij = w[((o * d.Cg + c) * win.kh + i) * win.kw + j];
                        for_each_position(win, i, j, [&](std::size_t k, std::size_t xk) { y_no[k] += w_ocij * x_nc[xk]; });
                    }
                }
            }
        }
    }
}

void conv2d_backward(const double* x, const double* w, const double* g, double* dx, double* dw, double* db,
                     const detail::ConvDims& d) {
    const detail::Window2d& win = d.win;
    for (std::size_t n = 0; n < d.N; ++n) {
        for (std::size_t o = 0; o < d.O; ++o) {
            const double* g_no = g + (n * d.O + o) * win.out_area();
            if (db != nullptr) {
                for (std::size_t k = 0; k < win.out_area(); ++k) db[o] += g_no[k];  // dL/db_o = sum g
            }
            const std::size_t group = o / d.Og;
            for (std::size_t c = 0; c < d.Cg; ++c) {
                const std::size_t x_plane = (n * d.C + group * d.Cg + c) * win.H * win.W;
                for (std::size_t i = 0; i < win.kh; ++i) {
                    for (std::size_t j = 0; j < win.kw; ++j) {
                        const std::size_t wk = ((o * d.Cg + c) * win.kh + i) * win.kw + j;
                        if (dx != nullptr) {  // dL/dx[n, c, r, q] += W[o, c, i, j] g
                            for_each_position(win, i, j, [&](std::size_t k, std::size_t xk) { dx[x_plane + xk] += w[wk] * g_no[k]; });
                        }
                        if (dw != nullptr) {  // dL/dW[o, c, i, j] += x[n, c, r, q] g
                            double dw_ocij = dw[wk];
                            for_each_position(win, i, j, [&](std::size_t k, std::size_t xk) { dw_ocij += x[x_plane + xk] * g_no[k]; });
                            dw[wk] = dw_ocij;
                        }
                    }
                }
            }
        }
    }
}

}  // namespace xg::nn::reference
