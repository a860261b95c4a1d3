// GroupNorm's fast kernels: the row loops of nn/reference/group_norm.cpp written with the
// primitives of nn/fast/kernel_primitives.hpp (kLanes partial sums, streaming stores), one channel
// of a row at a time, split between threads by rows. One body per loop, a template on the storage
// type T with double arithmetic (each stored value rounded once into T), and an AVX2 clone per type.
#include "nn/fast/group_norm.hpp"

#include <cmath>

#include "core/fast/parallel.hpp"
#include "core/engine/dtype.hpp"
#include "nn/fast/kernel_primitives.hpp"

namespace xg::nn::fast {

namespace {

using detail::BasicOutputStore;

// (N, C, S) in rows of one sample's group: C/G channels of S values, D = (C/G) S.
struct GroupLayout {
    std::size_t n = 0, channels = 0, groups = 1, spatial = 1;  // N, C, G, S
    std::size_t rows() const { return n * groups; }
    std::size_t channels_per_group() const { return channels / groups; }
    std::size_t width() const { return channels_per_group() * spatial; }  // D
    std::size_t channel(std::size_t row, std::size_t k) const { return (row % groups) * channels_per_group() + k; }
};

// Per row r in [r0, r1): mean, var (kept for InstanceNorm's running statistics), rstd = 1 / sqrt(var + eps),
// xhat = (x - mean) rstd, and per channel c of the row y = xhat w_c + b_c.
template <class T>
XG_KERNEL_INLINE void forward_rows_of(const T* x, const T* w, const T* b, T* y, double* row_mean, double* row_rstd,
                                      double* row_var, const GroupLayout& l, double eps, std::size_t r0, std::size_t r1) {
    const std::size_t S = l.spatial, D = l.width();
    const BasicOutputStore<T> store(y, l.rows() * D, S);
    for (std::size_t r = r0; r < r1; ++r) {
        double mean, var;
        detail::row_mean_var(x + r * D, D, mean, var);
        const double rstd = 1.0 / std::sqrt(var + eps);
        row_mean[r] = mean;
        row_var[r] = var;
        row_rstd[r] = rstd;
        for (std::size_t k = 0; k < l.channels_per_group(); ++k) {  // channel c: S values of the row
            const std::size_t c = l.channel(r, k);
            const T* xc = x + r * D + k * S;
            const double wc = double(w[c]), bc = double(b[c]);
            const auto xhat = [=](std::size_t j) { return (double(xc[j]) - mean) * rstd; };
            store(y + r * D + k * S, S, [=](std::size_t j) { return T(xhat(j) * wc + bc); });
        }
    }
}

// Per row, with g = dL/dy and dxhat = g w_c:
//   dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat));  dw_c += g xhat, db_c += g.
// Channel c's part of sum(dxhat) is w_c sum(g), of sum(dxhat xhat) w_c sum(g xhat): the two sums
// dw and db need anyway, so pass 1 takes them per channel; pass 2 writes dx. Rows [r0, r1); dw
// and db are this range's partial sums.
template <class T>
XG_KERNEL_INLINE void backward_rows_of(const T* x, const T* g, const T* w, const double* row_mean, const double* row_rstd, T* dx,
                                       double* dw, double* db, const GroupLayout& l, std::size_t r0, std::size_t r1) {
    const std::size_t S = l.spatial, D = l.width();
    const BasicOutputStore<T> store(dx, l.rows() * D, S);
    for (std::size_t r = r0; r < r1; ++r) {
        const double mean = row_mean[r], rstd = row_rstd[r];
        double sum_dxhat = 0.0, sum_dxhat_xhat = 0.0;
        for (std::size_t k = 0; k < l.channels_per_group(); ++k) {
            const std::size_t c = l.channel(r, k);
            const T *xc = x + r * D + k * S, *gc = g + r * D + k * S;
            const auto [sum_g, sum_g_xhat] = detail::row_sums(
                S, [=](std::size_t j) { return std::pair{double(gc[j]), double(gc[j]) * (double(xc[j]) - mean) * rstd}; });
            db[c] += sum_g;
            dw[c] += sum_g_xhat;
            sum_dxhat += double(w[c]) * sum_g;
            sum_dxhat_xhat += double(w[c]) * sum_g_xhat;
        }
        if (dx == nullptr) continue;
        const double mean_dxhat = sum_dxhat / static_cast<double>(D), mean_dxhat_xhat = sum_dxhat_xhat / static_cast<double>(D);
        for (std::size_t k = 0; k < l.channels_per_group(); ++k) {
            const std::size_t c = l.channel(r, k);
            const T *xc = x + r * D + k * S, *gc = g + r * D + k * S;
            const double wc = double(w[c]);
            const auto xhat = [=](std::size_t j) { return (double(xc[j]) - mean) * rstd; };
            store(dx + r * D + k * S, S,
                  [=](std::size_t j) { return T(rstd * (double(gc[j]) * wc - mean_dxhat - xhat(j) * mean_dxhat_xhat)); });
        }
    }
}

// The clones: one per storage type (GCC's target_clones takes no templates).
XG_KERNEL_CLONES void forward_rows(const double* x, const double* w, const double* b, double* y, double* row_mean,
                                   double* row_rstd, double* row_var, const GroupLayout& l, double eps, std::size_t r0,
                                   std::size_t r1) {
    forward_rows_of(x, w, b, y, row_mean, row_rstd, row_var, l, eps, r0, r1);
}
XG_KERNEL_CLONES void forward_rows(const float* x, const float* w, const float* b, float* y, double* row_mean, double* row_rstd,
                                   double* row_var, const GroupLayout& l, double eps, std::size_t r0, std::size_t r1) {
    forward_rows_of(x, w, b, y, row_mean, row_rstd, row_var, l, eps, r0, r1);
}
XG_KERNEL_CLONES void backward_rows(const double* x, const double* g, const double* w, const double* row_mean,
                                    const double* row_rstd, double* dx, double* dw, double* db, const GroupLayout& l,
                                    std::size_t r0, std::size_t r1) {
    backward_rows_of(x, g, w, row_mean, row_rstd, dx, dw, db, l, r0, r1);
}
XG_KERNEL_CLONES void backward_rows(const float* x, const float* g, const float* w, const double* row_mean,
                                    const double* row_rstd, float* dx, double* dw, double* db, const GroupLayout& l,
                                    std::size_t r0, std::size_t r1) {
    backward_rows_of(x, g, w, row_mean, row_rstd, dx, dw, db, l, r0, r1);
}
// bfloat16 only stores: the same double arithmetic (not cloned: no speed claim yet).
void forward_rows(const bfloat16* x, const bfloat16* w, const bfloat16* b, bfloat16* y, double* row_mean, double* row_rstd,
                  double* row_var, const GroupLayout& l, double eps, std::size_t r0, std::size_t r1) {
    forward_rows_of(x, w, b, y, row_mean, row_rstd, row_var, l, eps, r0, r1);
}
void backward_rows(const bfloat16* x, const bfloat16* g, const bfloat16* w, const double* row_mean, const double* row_rstd,
                   bfloat16* dx, double* dw, double* db, const GroupLayout& l, std::size_t r0, std::size_t r1) {
    backward_rows_of(x, g, w, row_mean, row_rstd, dx, dw, db, l, r0, r1);
}

}  // namespace

template <class T>
void group_norm_forward(const T* x, const T* w, const T* b, T* y, double* mean, double* rstd, double* var, std::size_t N,
                        std::size_t C, std::size_t G, std::size_t S, double eps) {
    const GroupLayout l{N, C, G, S};
    xg::detail::parallel_for(l.rows(), l.width(), [&](std::size_t r0, std::size_t r1) {
        forward_rows(x, w, b, y, mean, rstd, var, l, eps, r0, r1);
    });
}

template <class T>
void group_norm_backward(const T* x, const T* g, const T* w, const double* mean, const double* rstd, T* dx, double* dw,
                         double* db, std::size_t N, std::size_t C, std::size_t G, std::size_t S) {
    const GroupLayout l{N, C, G, S};
    xg::detail::sums_over_chunks(l.rows(), l.width(), l.channels, dw, db,
                                 [&](std::size_t r0, std::size_t r1, double* dw_part, double* db_part) {
        backward_rows(x, g, w, mean, rstd, dx, dw_part, db_part, l, r0, r1);
    });
}

XG_FOR_EACH_STORAGE_TYPE(XG_GROUP_NORM_KERNELS)

}  // namespace xg::nn::fast
