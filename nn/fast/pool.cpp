#include "nn/fast/pool.hpp"

#include <cmath>
#include <limits>
#include <vector>

#include "core/engine/dtype.hpp"
#include "nn/reference/double_sums.hpp"

// T is the storage type (nn/reference/pool_signatures.inc): max pooling copies the winner; the
// sums are double, in the reference kernels' order, each result rounded once into T.
namespace xg::nn::fast {

namespace {

using detail::AvgCell;
using detail::Window2d;

std::vector<AvgCell> avg_cells(const Window2d& w, bool count_include_pad) {
    std::vector<AvgCell> cells;
    for (std::size_t oh = 0; oh < w.OH; ++oh) {
        for (std::size_t ow = 0; ow < w.OW; ++ow) cells.push_back(detail::avg_cell(w, oh, ow, count_include_pad));
    }
    return cells;
}

}  // namespace

// y = max over the window; at = its flat position r W + q in the plane: the first maximum in
// row-major window order, or the last NaN (PyTorch's `v > best || isnan(v)`).
template <class T>
void max_pool2d_forward(const T* x, std::size_t n_planes, const Window2d& w, T* y, std::int64_t* at) {
    for (std::size_t p = 0; p < n_planes; ++p) {
        const T* in = x + p * w.H * w.W;
        for (std::size_t oh = 0; oh < w.OH; ++oh) {
            for (std::size_t ow = 0; ow < w.OW; ++ow) {
                T best = -std::numeric_limits<T>::infinity();
                std::int64_t best_at = -1;
                for (std::size_t i = 0; i < w.kh; ++i) {
                    for (std::size_t j = 0; j < w.kw; ++j) {
                        const long r = w.row(oh, i), q = w.col(ow, j);
                        if (!w.inside(r, q)) continue;  // padding never wins
                        const T v = in[r * static_cast<long>(w.W) + q];
                        if (best_at < 0 || v > best || std::isnan(v)) best = v, best_at = r * static_cast<long>(w.W) + q;
                    }
                }
                const std::size_t o = (p * w.OH + oh) * w.OW + ow;
                y[o] = best;
                at[o] = best_at;
            }
        }
    }
}

// dx[plane][at] += dy: each output's gradient goes to the one element that won
template <class T>
void max_pool2d_backward(const std::int64_t* at, const T* dy, std::size_t n_planes, const Window2d& w, T* dx_out) {
    const std::size_t plane_in = w.H * w.W, plane_out = w.out_area();
    detail::DoubleSums<T> dx_sums(dx_out, n_planes * plane_in);
    double* dx = dx_sums.data();
    for (std::size_t o = 0; o < n_planes * plane_out; ++o) {
        if (at[o] >= 0) dx[(o / plane_out) * plane_in + static_cast<std::size_t>(at[o])] += double(dy[o]);
    }
    dx_sums.store();
}

template <class T>
void avg_pool2d_forward(const T* x, std::size_t n_planes, const Window2d& w, bool count_include_pad, T* y) {
    const std::vector<AvgCell> cells = avg_cells(w, count_include_pad);
    const std::size_t plane_in = w.H * w.W, plane_out = w.out_area();
    for (std::size_t p = 0; p < n_planes; ++p) {
        const T* in = x + p * plane_in;
        for (std::size_t o = 0; o < plane_out; ++o) {
            const AvgCell& k = cells[o];
            double s = 0.0;
            for (long r = k.r0; r < k.r1; ++r) {
                for (long q = k.q0; q < k.q1; ++q) s += double(in[r * static_cast<long>(w.W) + q]);
            }
            y[p * plane_out + o] = T(s / k.divisor);
        }
    }
}

// dx[window of o] += dy[o] / divisor[o]
template <class T>
void avg_pool2d_backward(const T* dy, std::size_t n_planes, const Window2d& w, bool count_include_pad, T* dx_out) {
    const std::vector<AvgCell> cells = avg_cells(w, count_include_pad);
    const std::size_t plane_in = w.H * w.W, plane_out = w.out_area();
    detail::DoubleSums<T> dx_sums(dx_out, n_planes * plane_in);
    double* dx = dx_sums.data();
    for (std::size_t p = 0; p < n_planes; ++p) {
        double* out = dx + p * plane_in;
        for (std::size_t o = 0; o < plane_out; ++o) {
            const AvgCell& k = cells[o];
            const double share = double(dy[p * plane_out + o]) / k.divisor;
            for (long r = k.r0; r < k.r1; ++r) {
                for (long q = k.q0; q < k.q1; ++q) out[r * static_cast<long>(w.W) + q] += share;
            }
        }
    }
    dx_sums.store();
}

XG_FOR_EACH_STORAGE_TYPE(XG_POOL_KERNELS)

}  // namespace xg::nn::fast
