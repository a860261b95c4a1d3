// RMSNorm's fast kernels: the row loops of nn/reference/rms_norm.cpp written with the primitives
// of nn/fast/kernel_primitives.hpp (kLanes partial sums, streaming stores), split between threads
// by rows.
#include "nn/fast/rms_norm.hpp"

#include <cmath>

#include "core/fast/parallel.hpp"
#include "nn/fast/kernel_primitives.hpp"

namespace xg::nn::fast {

namespace {

using detail::OutputStore;

// Per row: rrms = 1 / sqrt(mean(x^2) + eps), xhat = x rrms, y = xhat w. All terms of mean(x^2)
// are non-negative, so one pass loses nothing to cancellation.
// Rows [r0, r1).
XG_KERNEL_CLONES void forward_rows(const double* x, const double* w, double* y, double* row_rrms, std::size_t rows, std::size_t D,
                                   double eps, std::size_t r0, std::size_t r1) {
    const OutputStore store(y, rows * D, D);
    for (std::size_t r = r0; r < r1; ++r) {
        const double* xr = x + r * D;
        const double sum_x2 = detail::row_sum(D, [=](std::size_t j) { return xr[j] * xr[j]; });
        const double rrms = 1.0 / std::sqrt(sum_x2 / static_cast<double>(D) + eps);
        row_rrms[r] = rrms;
        const auto xhat = [=](std::size_t j) { return xr[j] * rrms; };
        store(y + r * D, D, [=](std::size_t j) { return xhat(j) * w[j]; });
    }
}

// Per row, with g = dL/dy and dxhat = g w:  dx = rrms (dxhat - xhat mean(dxhat xhat));  dw += g xhat.
// Rows [r0, r1); dw is this range's partial sum.
XG_KERNEL_CLONES void backward_rows(const double* x, const double* g, const double* w, const double* row_rrms, double* dx,
                                    double* dw, std::size_t rows, std::size_t D, std::size_t r0, std::size_t r1) {
    const double inv_D = 1.0 / static_cast<double>(D);
    const OutputStore store(dx, rows * D, D);
    for (std::size_t r = r0; r < r1; ++r) {
        const double *xr = x + r * D, *gr = g + r * D, rrms = row_rrms[r];
        const auto xhat = [=](std::size_t j) { return xr[j] * rrms; };
        const auto dxhat = [=](std::size_t j) { return gr[j] * w[j]; };
        const double sum_dxhat_xhat = detail::row_sum(D, [=](std::size_t j) {
            const double g_j = gr[j], xhat_j = xhat(j), dxhat_j = dxhat(j);  // read before dw is written
            dw[j] += g_j * xhat_j;
            return dxhat_j * xhat_j;
        });
        if (dx == nullptr) continue;
        const double mean_dxhat_xhat = sum_dxhat_xhat * inv_D;
        store(dx + r * D, D, [=](std::size_t j) { return rrms * (dxhat(j) - xhat(j) * mean_dxhat_xhat); });
    }
}

}  // namespace

void rms_norm_forward(const double* x, const double* w, double* y, double* rrms, std::size_t rows, std::size_t D, double eps) {
    xg::detail::parallel_for(rows, D, [&](std::size_t r0, std::size_t r1) { forward_rows(x, w, y, rrms, rows, D, eps, r0, r1); });
}

void rms_norm_backward(const double* x, const double* g, const double* w, const double* rrms, double* dx, double* dw,
                       std::size_t rows, std::size_t D) {
    xg::detail::sums_over_chunks(rows, D, D, dw, nullptr, [&](std::size_t r0, std::size_t r1, double* dw_part, double*) {
        backward_rows(x, g, w, rrms, dx, dw_part, rows, D, r0, r1);
    });
}

}  // namespace xg::nn::fast
