// conv2d as the sum it is (docs/derivations/conv2d.md, "Forward"), and its backward as the same
// loops read backwards: each product W[o, c, i, j] x[n, c, r, q] in y sends g W to dx and g x to dW.
// The loops run over one weight W[o, c, i, j] at a time and the whole output plane under it, so
// every y still adds its products in the order (c, i, j). The fast tier computes the same sums as
// one GEMM per sample and group (im2col).
// Every value read is widened to double and every sum is a double (a float32 op = float32 storage
// + float64 arithmetic between stores: docs/precision.md, "Accumulators"); each result is rounded
// once into T at its store. For T = double the sums are the outputs themselves, as before.
#include "nn/reference/conv.hpp"

#include <type_traits>
#include <vector>

#include "core/engine/dtype.hpp"
#include "nn/reference/double_sums.hpp"

namespace xg::nn::reference {

namespace {

// Calls f(k, xk) for every output position k = oh OW + ow of a plane whose input position
// (r, q) = (oh s_h - p_h + i d_h, ow s_w - p_w + j d_w) under kernel tap (i, j) lies inside the
// image, with xk = r W + q its place in an input plane (the padding reads 0: it adds nothing).
// The columns inside are one range per tap (Window2d::cols_inside), so the inner loop has no test.
template <class F>
void for_each_position(const detail::Window2d& win, std::size_t i, std::size_t j, F&& f) {
    const auto [ow_first, ow_last] = win.cols_inside(j);
    for (std::size_t oh = 0; oh < win.OH; ++oh) {
        const long r = win.row(oh, i);
        if (r < 0 || r >= static_cast<long>(win.H)) continue;  // a row of the padding
        const std::size_t k_row = oh * win.OW;
        const long x_row = r * static_cast<long>(win.W) + win.col(0, j);  // where column ow = 0 would read
        for (std::size_t ow = ow_first; ow < ow_last; ++ow) f(k_row + ow, static_cast<std::size_t>(x_row + static_cast<long>(ow * win.sw)));
    }
}

}  // namespace

template <class T>
void conv2d_forward(const T* x, const T* w, const T* b, T* y, const detail::ConvDims& d) {
    const detail::Window2d& win = d.win;
    std::vector<double> y_no(win.out_area());  // one output plane's sums
    for (std::size_t n = 0; n < d.N; ++n) {
        for (std::size_t o = 0; o < d.O; ++o) {
            for (std::size_t k = 0; k < win.out_area(); ++k) y_no[k] = b == nullptr ? 0.0 : double(b[o]);  // y = b_o + sum W x
            const std::size_t g = o / d.Og;  // o's group
            for (std::size_t c = 0; c < d.Cg; ++c) {
                const T* x_nc = x + (n * d.C + g * d.Cg + c) * win.H * win.W;
                for (std::size_t i = 0; i < win.kh; ++i) {
                    for (std::size_t j = 0; j < win.kw; ++j) {
                        const double w_ocij = double(w[((o * d.Cg + c) * win.kh + i) * win.kw + j]);
                        for_each_position(win, i, j, [&](std::size_t k, std::size_t xk) { y_no[k] += w_ocij * double(x_nc[xk]); });
                    }
                }
            }
            T* y_out = y + (n * d.O + o) * win.out_area();
            for (std::size_t k = 0; k < win.out_area(); ++k) y_out[k] = T(y_no[k]);
        }
    }
}

template <class T>
void conv2d_backward(const T* x, const T* w, const T* g, T* dx_out, T* dw_out, T* db_out, const detail::ConvDims& d) {
    const detail::Window2d& win = d.win;
    detail::DoubleSums<T> dx_sums(dx_out, d.N * d.C * win.H * win.W), dw_sums(dw_out, d.O * d.K), db_sums(db_out, d.O);
    double *dx = dx_sums.data(), *dw = dw_sums.data(), *db = db_sums.data();
    for (std::size_t n = 0; n < d.N; ++n) {
        for (std::size_t o = 0; o < d.O; ++o) {
            const T* g_no = g + (n * d.O + o) * win.out_area();
            if (db != nullptr) {
                for (std::size_t k = 0; k < win.out_area(); ++k) db[o] += double(g_no[k]);  // dL/db_o = sum g
            }
            const std::size_t group = o / d.Og;
            for (std::size_t c = 0; c < d.Cg; ++c) {
                const std::size_t x_plane = (n * d.C + group * d.Cg + c) * win.H * win.W;
                for (std::size_t i = 0; i < win.kh; ++i) {
                    for (std::size_t j = 0; j < win.kw; ++j) {
                        const std::size_t wk = ((o * d.Cg + c) * win.kh + i) * win.kw + j;
                        if (dx != nullptr) {  // dL/dx[n, c, r, q] += W[o, c, i, j] g
                            const double w_ocij = double(w[wk]);
                            for_each_position(win, i, j,
                                              [&](std::size_t k, std::size_t xk) { dx[x_plane + xk] += w_ocij * double(g_no[k]); });
                        }
                        if (dw != nullptr) {  // dL/dW[o, c, i, j] += x[n, c, r, q] g
                            double dw_ocij = dw[wk];
                            for_each_position(win, i, j,
                                              [&](std::size_t k, std::size_t xk) { dw_ocij += double(x[x_plane + xk]) * double(g_no[k]); });
                            dw[wk] = dw_ocij;
                        }
                    }
                }
            }
        }
    }
    dx_sums.store();
    dw_sums.store();
    db_sums.store();
}

XG_FOR_EACH_STORAGE_TYPE(XG_CONV_KERNELS)

}  // namespace xg::nn::reference
