// Max and average pooling: docs/derivations/pool2d.md, one loop per formula. Plane p holds
// x[p, r, q] at p H W + r W + q; outputs y[p, oh, ow] at p OH OW + oh OW + ow.
// Max pooling copies the winning value (exact in any T); every sum (an average's window, dx's
// parts from overlapping windows) is a double over widened values, each result rounded once into T
// (docs/precision.md, "Accumulators"). For T = double the sums are the outputs themselves, as before.
#include "nn/reference/pool.hpp"

#include <cmath>

#include "core/engine/dtype.hpp"
#include "nn/reference/double_sums.hpp"

namespace xg::nn::reference {

template <class T>
void max_pool2d_forward(const T* x, std::size_t planes, const detail::Window2d& w, T* y, std::int64_t* a) {
    for (std::size_t p = 0; p < planes; ++p) {
        for (std::size_t oh = 0; oh < w.OH; ++oh) {
            for (std::size_t ow = 0; ow < w.OW; ++ow) {
                T best = T(0);
                long best_at = -1;  // none yet
                for (std::size_t i = 0; i < w.kh; ++i) {
                    for (std::size_t j = 0; j < w.kw; ++j) {
                        const long r = w.row(oh, i), q = w.col(ow, j);
                        if (!w.inside(r, q)) continue;  // padding never wins
                        const long at = r * static_cast<long>(w.W) + q;
                        const T v = x[p * w.H * w.W + static_cast<std::size_t>(at)];
                        // the first maximum, or the last NaN (PyTorch's `v > best || isnan(v)`)
                        if (best_at < 0 || v > best || std::isnan(v)) best = v, best_at = at;
                    }
                }
                const std::size_t o = (p * w.OH + oh) * w.OW + ow;
                y[o] = best;       // y[oh, ow] = max over the window
                a[o] = best_at;    // a[oh, ow] = r W + q of that maximum
            }
        }
    }
}

template <class T>
void max_pool2d_backward(const std::int64_t* a, const T* g, std::size_t planes, const detail::Window2d& w, T* dx_out) {
    detail::DoubleSums<T> dx_sums(dx_out, planes * w.H * w.W);
    double* dx = dx_sums.data();
    for (std::size_t p = 0; p < planes; ++p) {
        for (std::size_t o = 0; o < w.OH * w.OW; ++o) {
            const std::int64_t at = a[p * w.OH * w.OW + o];
            if (at >= 0) dx[p * w.H * w.W + static_cast<std::size_t>(at)] += double(g[p * w.OH * w.OW + o]);  // dx[a] += g
        }
    }
    dx_sums.store();
}

template <class T>
void avg_pool2d_forward(const T* x, std::size_t planes, const detail::Window2d& w, bool count_include_pad, T* y) {
    for (std::size_t p = 0; p < planes; ++p) {
        for (std::size_t oh = 0; oh < w.OH; ++oh) {
            for (std::size_t ow = 0; ow < w.OW; ++ow) {
                const detail::AvgCell cell = detail::avg_cell(w, oh, ow, count_include_pad);
                double sum = 0.0;
                for (long r = cell.r0; r < cell.r1; ++r) {
                    for (long q = cell.q0; q < cell.q1; ++q) sum += double(x[p * w.H * w.W + static_cast<std::size_t>(r * static_cast<long>(w.W) + q)]);
                }
                y[(p * w.OH + oh) * w.OW + ow] = T(sum / cell.divisor);  // y = (1 / n) sum over the window
            }
        }
    }
}

template <class T>
void avg_pool2d_backward(const T* g, std::size_t planes, const detail::Window2d& w, bool count_include_pad, T* dx_out) {
    detail::DoubleSums<T> dx_sums(dx_out, planes * w.H * w.W);
    double* dx = dx_sums.data();
    for (std::size_t p = 0; p < planes; ++p) {
        for (std::size_t oh = 0; oh < w.OH; ++oh) {
            for (std::size_t ow = 0; ow < w.OW; ++ow) {
                const detail::AvgCell cell = detail::avg_cell(w, oh, ow, count_include_pad);
                const double share = double(g[(p * w.OH + oh) * w.OW + ow]) / cell.divisor;  // dx += g / n over the window
                for (long r = cell.r0; r < cell.r1; ++r) {
                    for (long q = cell.q0; q < cell.q1; ++q) dx[p * w.H * w.W + static_cast<std::size_t>(r * static_cast<long>(w.W) + q)] += share;
                }
            }
        }
    }
    dx_sums.store();
}

XG_FOR_EACH_STORAGE_TYPE(XG_POOL_KERNELS)

}  // namespace xg::nn::reference
