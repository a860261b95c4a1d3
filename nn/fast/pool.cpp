#include "nn/fast/pool.hpp"

#include <cmath>
#include <limits>
#include <vector>

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
void max_pool2d_forward(const double* x, std::size_t n_planes, const Window2d& w, double* y, std::int64_t* at) {
    for (std::size_t p = 0; p < n_planes; ++p) {
        const double* in = x + p * w.H * w.W;
        for (std::size_t oh = 0; oh < w.OH; ++oh) {
            for (std::size_t ow = 0; ow < w.OW; ++ow) {
                double best = -std::numeric_limits<double>::infinity();
                std::int64_t best_at = -1;
                for (std::size_t i = 0; i < w.kh; ++i) {
                    for (std::size_t j = 0; j < w.kw; ++j) {
                        const long r = w.row(oh, i), q = w.col(ow, j);
                        if (!w.inside(r, q)) continue;  // padding never wins
                        const double v = in[r * static_cast<long>(w.W) + q];
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
void max_pool2d_backward(const std::int64_t* at, const double* dy, std::size_t n_planes, const Window2d& w, double* dx) {
    const std::size_t plane_in = w.H * w.W, plane_out = w.out_area();
    for (std::size_t o = 0; o < n_planes * plane_out; ++o) {
        if (at[o] >= 0) dx[(o / plane_out) * plane_in + static_cast<std::size_t>(at[o])] += dy[o];
    }
}

void avg_pool2d_forward(const double* x, std::size_t n_planes, const Window2d& w, bool count_include_pad, double* y) {
    const std::vector<AvgCell> cells = avg_cells(w, count_include_pad);
    const std::size_t plane_in = w.H * w.W, plane_out = w.out_area();
    for (std::size_t p = 0; p < n_planes; ++p) {
        const double* in = x + p * plane_in;
        for (std::size_t o = 0; o < plane_out; ++o) {
            const AvgCell& k = cells[o];
            double s = 0.0;
            for (long r = k.r0; r < k.r1; ++r) {
                for (long q = k.q0; q < k.q1; ++q) s += in[r * static_cast<long>(w.W) + q];
            }
            y[p * plane_out + o] = s / k.divisor;
        }
    }
}

// dx[window of o] += dy[o] / divisor[o]
void avg_pool2d_backward(const double* dy, std::size_t n_planes, const Window2d& w, bool count_include_pad, double* dx) {
    const std::vector<AvgCell> cells = avg_cells(w, count_include_pad);
    const std::size_t plane_in = w.H * w.W, plane_out = w.out_area();
    for (std::size_t p = 0; p < n_planes; ++p) {
        double* out = dx + p * plane_in;
        for (std::size_t o = 0; o < plane_out; ++o) {
            const AvgCell& k = cells[o];
            const double share = dy[p * plane_out + o] / k.divisor;
            for (long r = k.r0; r < k.r1; ++r) {
                for (long q = k.q0; q < k.q1; ++q) out[r * static_cast<long>(w.W) + q] += share;
            }
        }
    }
}

}  // namespace xg::nn::fast
