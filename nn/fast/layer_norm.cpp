// LayerNorm's fast kernels: the row loops of nn/reference/layer_norm.cpp in the style of llm.c's
// layernorm_forward/backward, written with the primitives of nn/fast/kernel_primitives.hpp (kLanes
// partial sums, streaming stores, the next row's prefetch) and split between threads by rows.
// One body per loop, a template on the storage type T (double, float), compiled into an AVX2 clone
// per type. The arithmetic is T's (float: 8 lanes per AVX2 vector; double for float rows of one or
// two values, below, and for rows whose deviations square beyond float's range:
// detail::float_row_in_range), the row statistics, row sums and dw, db are double whatever T
// (docs/precision.md, "Accumulators": the float rounding, measured).
#include "nn/fast/layer_norm.hpp"

#include <cmath>
#include <type_traits>

#include "core/fast/parallel.hpp"
#include "nn/fast/kernel_primitives.hpp"
#include "core/engine/dtype.hpp"

namespace xg::nn::fast {

namespace {

using detail::BasicOutputStore;
using detail::next_row;

// The next row of x while y's row is written: only for float (measured 10-20 % faster for rows of
// 768 floats; for double rows the forward measured no faster: docs/performance.md).
template <class T>
XG_KERNEL_INLINE detail::BasicNextRow<T> next_x_row(const T* x, std::size_t r, std::size_t end, std::size_t D) {
    if constexpr (std::is_same_v<T, float>) {
        if (r + 1 < end) return {x + (r + 1) * D, nullptr};
    }
    return {};
}

// The row machinery by the arithmetic type: double rows use the double primitives as they are;
// float rows centre x on the float pair hi + lo of the double mean (nn/fast/kernel_primitives.hpp,
// FloatPair: x - float(mean) would lose u |mean| to the rounding of the mean) and sum in float
// blocks flushed into double.
template <class T>
struct RowMath;
template <>
struct RowMath<double> {
    struct Centre {
        double mean;
        explicit Centre(double m) : mean(m) {}
        XG_KERNEL_INLINE double operator()(double x) const { return x - mean; }
    };
    template <class T>
    XG_KERNEL_INLINE static void mean_var(const T* x, std::size_t n, double& mean, double& var) { detail::row_mean_var(x, n, mean, var); }
    template <class Term>
    XG_KERNEL_INLINE static std::pair<double, double> sums(std::size_t n, Term&& term) { return detail::row_sums(n, term); }
};
template <>
struct RowMath<float> {
    struct Centre {
        detail::FloatPair mean;
        explicit Centre(double m) : mean(m) {}
        XG_KERNEL_INLINE float operator()(float x) const { return (x - mean.hi) - mean.lo; }
    };
    template <class T>
    XG_KERNEL_INLINE static void mean_var(const T* x, std::size_t n, double& mean, double& var) { detail::row_mean_var_float(x, n, mean, var); }
    template <class Term>
    XG_KERNEL_INLINE static std::pair<double, double> sums(std::size_t n, Term&& term) { return detail::row_sums_float(n, term); }
};

// Per row r in [r0, r1): mean, var, rstd = 1 / sqrt(var + eps), xhat = (x - mean) rstd, y = xhat w + b.
// C is the arithmetic's type: T, or double for float rows too short to compute in float (below).
template <class T, class C = T>
XG_KERNEL_INLINE void forward_rows_of(const T* x, const T* w, const T* b, T* y, double* row_mean, double* row_rstd,
                                      std::size_t rows, std::size_t D, double eps, std::size_t r0, std::size_t r1) {
    const BasicOutputStore<T> store(y, rows * D, D);
    for (std::size_t r = r0; r < r1; ++r) {
        const T* xr = x + r * D;
        double mean, var;
        RowMath<C>::mean_var(xr, D, mean, var);
        const double rstd = 1.0 / std::sqrt(var + eps);
        if constexpr (std::is_same_v<C, float>) {
            if (!detail::float_row_in_range(mean, rstd)) {  // a float sum overflowed, or would: the row in double
                forward_rows_of<T, double>(x, w, b, y, row_mean, row_rstd, rows, D, eps, r, r + 1);
                continue;
            }
        }
        row_mean[r] = mean;
        row_rstd[r] = rstd;
        const typename RowMath<C>::Centre centre(mean);
        const C rstd_t = static_cast<C>(rstd);
        const auto xhat = [=](std::size_t j) { return centre(xr[j]) * rstd_t; };
        store(y + r * D, D, [=](std::size_t j) { return xhat(j) * C(w[j]) + C(b[j]); }, next_x_row<T>(x, r, r1, D));
    }
}

// Per row, with g = dL/dy and dxhat = g w:
//   dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat));  dw += g xhat, db += g.
// Pass 1 takes the two means (and dw, db), pass 2 writes dx; the row stays in L1/L2 between them,
// and pass 2 fetches the next row of x and g meanwhile (OutputStore: otherwise memory idles).
// Rows [r0, r1); dw and db are this range's partial sums (double whatever T: docs/precision.md).
// C is the arithmetic's type: T, or double for float rows too short to compute in float (below).
template <class T, class C = T>
XG_KERNEL_INLINE void backward_rows_of(const T* x, const T* g, const T* w, const double* row_mean, const double* row_rstd, T* dx,
                                       double* dw, double* db, std::size_t rows, std::size_t D, std::size_t r0, std::size_t r1) {
    const double inv_D = 1.0 / static_cast<double>(D);
    const BasicOutputStore<T> store(dx, rows * D, D);
    detail::ColumnSums<C> dw_sums(dw, D), db_sums(db, D);
    for (std::size_t r = r0; r < r1; ++r) {
        if constexpr (std::is_same_v<C, float>) {
            if (!detail::float_row_in_range(row_mean[r], row_rstd[r])) {  // as the forward: the row in double
                backward_rows_of<T, double>(x, g, w, row_mean, row_rstd, dx, dw, db, rows, D, r, r + 1);
                continue;
            }
        }
        const T *xr = x + r * D, *gr = g + r * D;
        const typename RowMath<C>::Centre centre(row_mean[r]);
        const C rstd = static_cast<C>(row_rstd[r]);
        const auto xhat = [=](std::size_t j) { return centre(xr[j]) * rstd; };
        const auto dxhat = [=](std::size_t j) { return C(gr[j]) * C(w[j]); };
        C *dw_r = dw_sums.row(), *db_r = db_sums.row();
        const auto [sum_dxhat, sum_dxhat_xhat] = RowMath<C>::sums(D, [=](std::size_t j) {
            const C g_j = gr[j], xhat_j = xhat(j), dxhat_j = dxhat(j);  // read before dw, db are written
            dw_r[j] += g_j * xhat_j;
            db_r[j] += g_j;
            return std::pair{dxhat_j, dxhat_j * xhat_j};
        });
        dw_sums.end_row(), db_sums.end_row();
        if (dx == nullptr) continue;
        const C mean_dxhat = static_cast<C>(sum_dxhat * inv_D), mean_dxhat_xhat = static_cast<C>(sum_dxhat_xhat * inv_D);
        store(dx + r * D, D, [=](std::size_t j) { return rstd * (dxhat(j) - mean_dxhat - xhat(j) * mean_dxhat_xhat); },
              next_row(x, g, r, r1, D));
    }
}

// The clones: one per storage type (GCC's target_clones takes no templates).
XG_KERNEL_CLONES void forward_rows(const double* x, const double* w, const double* b, double* y, double* mean, double* rstd,
                                   std::size_t rows, std::size_t D, double eps, std::size_t r0, std::size_t r1) {
    forward_rows_of(x, w, b, y, mean, rstd, rows, D, eps, r0, r1);
}
// Rows of one or two values: with two, xhat = +-s, s^2 = var / (var + eps), and dx = +-rstd (dxhat_1 -
// dxhat_2) (1 - s^2) / 2: the terms cancel to eps / (var + eps) of their size, which float arithmetic
// (in dx and in the forward's var, rstd) cannot resolve (measured 5e4 u: docs/precision.md); with
// one, dx is 0. Those rows compute in double, forward and backward, as the reference kernels do.
constexpr std::size_t kWidestRowInDouble = 2;
// float arithmetic for the storage types narrower than double (float, bfloat16), narrow rows in double.
template <class T>
XG_KERNEL_INLINE void narrow_forward_rows(const T* x, const T* w, const T* b, T* y, double* mean, double* rstd, std::size_t rows,
                                          std::size_t D, double eps, std::size_t r0, std::size_t r1) {
    if (D <= kWidestRowInDouble) {
        forward_rows_of<T, double>(x, w, b, y, mean, rstd, rows, D, eps, r0, r1);
    } else {
        forward_rows_of<T, float>(x, w, b, y, mean, rstd, rows, D, eps, r0, r1);
    }
}
XG_KERNEL_CLONES void forward_rows(const float* x, const float* w, const float* b, float* y, double* mean, double* rstd,
                                   std::size_t rows, std::size_t D, double eps, std::size_t r0, std::size_t r1) {
    narrow_forward_rows(x, w, b, y, mean, rstd, rows, D, eps, r0, r1);
}
// bfloat16 only stores: float arithmetic, as float's (not cloned: no speed claim yet).
void forward_rows(const bfloat16* x, const bfloat16* w, const bfloat16* b, bfloat16* y, double* mean, double* rstd, std::size_t rows,
                  std::size_t D, double eps, std::size_t r0, std::size_t r1) {
    narrow_forward_rows(x, w, b, y, mean, rstd, rows, D, eps, r0, r1);
}
XG_KERNEL_CLONES void backward_rows(const double* x, const double* g, const double* w, const double* mean, const double* rstd,
                                    double* dx, double* dw, double* db, std::size_t rows, std::size_t D, std::size_t r0,
                                    std::size_t r1) {
    backward_rows_of(x, g, w, mean, rstd, dx, dw, db, rows, D, r0, r1);
}
template <class T>
XG_KERNEL_INLINE void narrow_backward_rows(const T* x, const T* g, const T* w, const double* mean, const double* rstd, T* dx,
                                           double* dw, double* db, std::size_t rows, std::size_t D, std::size_t r0, std::size_t r1) {
    if (D <= kWidestRowInDouble) {
        backward_rows_of<T, double>(x, g, w, mean, rstd, dx, dw, db, rows, D, r0, r1);
    } else {
        backward_rows_of<T, float>(x, g, w, mean, rstd, dx, dw, db, rows, D, r0, r1);
    }
}
XG_KERNEL_CLONES void backward_rows(const float* x, const float* g, const float* w, const double* mean, const double* rstd,
                                    float* dx, double* dw, double* db, std::size_t rows, std::size_t D, std::size_t r0,
                                    std::size_t r1) {
    narrow_backward_rows(x, g, w, mean, rstd, dx, dw, db, rows, D, r0, r1);
}
void backward_rows(const bfloat16* x, const bfloat16* g, const bfloat16* w, const double* mean, const double* rstd, bfloat16* dx,
                   double* dw, double* db, std::size_t rows, std::size_t D, std::size_t r0, std::size_t r1) {
    narrow_backward_rows(x, g, w, mean, rstd, dx, dw, db, rows, D, r0, r1);
}

}  // namespace

template <class T>
void layer_norm_forward(const T* x, const T* w, const T* b, T* y, double* mean, double* rstd, std::size_t rows, std::size_t D,
                        double eps) {
    xg::detail::parallel_for(rows, D, [&](std::size_t r0, std::size_t r1) {
        forward_rows(x, w, b, y, mean, rstd, rows, D, eps, r0, r1);
    });
}

template <class T>
void layer_norm_backward(const T* x, const T* g, const T* w, const double* mean, const double* rstd, T* dx, double* dw,
                         double* db, std::size_t rows, std::size_t D) {
    xg::detail::sums_over_chunks(rows, D, D, dw, db, [&](std::size_t r0, std::size_t r1, double* dw_part, double* db_part) {
        backward_rows(x, g, w, mean, rstd, dx, dw_part, db_part, rows, D, r0, r1);
    });
}

XG_FOR_EACH_STORAGE_TYPE(XG_LAYER_NORM_KERNELS)

}  // namespace xg::nn::fast
