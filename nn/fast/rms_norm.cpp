// RMSNorm's fast kernels: the row loops of nn/reference/rms_norm.cpp written with the primitives
// of nn/fast/kernel_primitives.hpp (kLanes partial sums, streaming stores), split between threads
// by rows. One body per loop, a template on the storage type T (double, float), compiled into an
// AVX2 clone per type. The arithmetic is T's (float: 8 lanes per AVX2 vector; double for float rows
// of one value, below, and for rows whose values square beyond float's range:
// detail::float_row_in_range); rrms, the row sums and dw are double whatever T (docs/precision.md,
// "Accumulators": the float rounding, measured).
#include "nn/fast/rms_norm.hpp"

#include <cmath>
#include <type_traits>

#include "core/fast/parallel.hpp"
#include "nn/fast/kernel_primitives.hpp"
#include "core/engine/dtype.hpp"

namespace xg::nn::fast {

namespace {

using detail::BasicOutputStore;

// The next rows of x and g while y's or dx's row is written: only for float (measured 20-30 % faster
// for rows of 768 floats; double rows measured no faster or slower: docs/performance.md). The
// forward passes x twice (one fetch of the line is enough; the second hits the cache).
template <class T>
XG_KERNEL_INLINE detail::BasicNextRow<T> next_rows_of_float(const T* x, const T* g, std::size_t r, std::size_t end, std::size_t D) {
    if constexpr (std::is_same_v<T, float>) return detail::next_row(x, g, r, end, D);
    return {};
}

// Row sums of T terms, in double: double terms with the double primitive as it is, float terms
// summed in float blocks flushed into double (nn/fast/kernel_primitives.hpp, row_sums_float).
template <class T, class Term>
XG_KERNEL_INLINE double row_sum_of(std::size_t n, Term&& term) {
    if constexpr (std::is_same_v<T, float>) {
        return detail::row_sum_float(n, term);
    } else {
        return detail::row_sum(n, term);
    }
}

// Per row: rrms = 1 / sqrt(mean(x^2) + eps), xhat = x rrms, y = xhat w. All terms of mean(x^2)
// are non-negative, so one pass loses nothing to cancellation.
// Rows [r0, r1). C is the arithmetic's type: T, or double for float rows of one value (below).
template <class T, class C = T>
XG_KERNEL_INLINE void forward_rows_of(const T* x, const T* w, T* y, double* row_rrms, std::size_t rows, std::size_t D, double eps,
                                      std::size_t r0, std::size_t r1) {
    const BasicOutputStore<T> store(y, rows * D, D);
    for (std::size_t r = r0; r < r1; ++r) {
        const T* xr = x + r * D;
        const double sum_x2 = row_sum_of<C>(D, [=](std::size_t j) { return C(xr[j]) * C(xr[j]); });
        const double rrms = 1.0 / std::sqrt(sum_x2 / static_cast<double>(D) + eps);
        if constexpr (std::is_same_v<C, float>) {
            if (!detail::float_row_in_range(0.0, rrms)) {  // the float sum overflowed, or would: the row in double
                forward_rows_of<T, double>(x, w, y, row_rrms, rows, D, eps, r, r + 1);
                continue;
            }
        }
        row_rrms[r] = rrms;
        const C rrms_t = static_cast<C>(rrms);
        const auto xhat = [=](std::size_t j) { return xr[j] * rrms_t; };
        store(y + r * D, D, [=](std::size_t j) { return xhat(j) * C(w[j]); }, next_rows_of_float(x, x, r, r1, D));
    }
}

// Per row, with g = dL/dy and dxhat = g w:  dx = rrms (dxhat - xhat mean(dxhat xhat));  dw += g xhat.
// Rows [r0, r1); dw is this range's partial sum (double whatever T: docs/precision.md).
// C is the arithmetic's type: T, or double for float rows of one value (below).
template <class T, class C = T>
XG_KERNEL_INLINE void backward_rows_of(const T* x, const T* g, const T* w, const double* row_rrms, T* dx, double* dw,
                                       std::size_t rows, std::size_t D, std::size_t r0, std::size_t r1) {
    const double inv_D = 1.0 / static_cast<double>(D);
    const BasicOutputStore<T> store(dx, rows * D, D);
    detail::ColumnSums<C> dw_sums(dw, D);
    for (std::size_t r = r0; r < r1; ++r) {
        if constexpr (std::is_same_v<C, float>) {
            if (!detail::float_row_in_range(0.0, row_rrms[r])) {  // as the forward: the row in double
                backward_rows_of<T, double>(x, g, w, row_rrms, dx, dw, rows, D, r, r + 1);
                continue;
            }
        }
        const T *xr = x + r * D, *gr = g + r * D;
        const C rrms = static_cast<C>(row_rrms[r]);
        const auto xhat = [=](std::size_t j) { return xr[j] * rrms; };
        const auto dxhat = [=](std::size_t j) { return C(gr[j]) * C(w[j]); };
        C* dw_r = dw_sums.row();
        const double sum_dxhat_xhat = row_sum_of<C>(D, [=](std::size_t j) {
            const C g_j = gr[j], xhat_j = xhat(j), dxhat_j = dxhat(j);  // read before dw is written
            dw_r[j] += g_j * xhat_j;
            return dxhat_j * xhat_j;
        });
        dw_sums.end_row();
        if (dx == nullptr) continue;
        const C mean_dxhat_xhat = static_cast<C>(sum_dxhat_xhat * inv_D);
        store(dx + r * D, D, [=](std::size_t j) { return rrms * (dxhat(j) - xhat(j) * mean_dxhat_xhat); },
              next_rows_of_float(x, g, r, r1, D));
    }
}

// The clones: one per storage type (GCC's target_clones takes no templates).
XG_KERNEL_CLONES void forward_rows(const double* x, const double* w, double* y, double* rrms, std::size_t rows, std::size_t D,
                                   double eps, std::size_t r0, std::size_t r1) {
    forward_rows_of(x, w, y, rrms, rows, D, eps, r0, r1);
}
// Rows of one value: xhat = +-sqrt(x^2 / (x^2 + eps)), so dx = rrms dxhat (1 - xhat^2): the terms
// cancel to eps / (x^2 + eps) of their size, which float arithmetic (in dx and in the forward's
// rrms) cannot resolve (measured 2e4 u: docs/precision.md). Those rows compute in double, forward
// and backward, as the reference kernels do.
// float arithmetic for the storage types narrower than double (float, bfloat16), rows of one in double.
template <class T>
XG_KERNEL_INLINE void narrow_forward_rows(const T* x, const T* w, T* y, double* rrms, std::size_t rows, std::size_t D, double eps,
                                          std::size_t r0, std::size_t r1) {
    if (D == 1) {
        forward_rows_of<T, double>(x, w, y, rrms, rows, D, eps, r0, r1);
    } else {
        forward_rows_of<T, float>(x, w, y, rrms, rows, D, eps, r0, r1);
    }
}
XG_KERNEL_CLONES void forward_rows(const float* x, const float* w, float* y, double* rrms, std::size_t rows, std::size_t D,
                                   double eps, std::size_t r0, std::size_t r1) {
    narrow_forward_rows(x, w, y, rrms, rows, D, eps, r0, r1);
}
// bfloat16 only stores: float arithmetic, as float's (not cloned: no speed claim yet).
void forward_rows(const bfloat16* x, const bfloat16* w, bfloat16* y, double* rrms, std::size_t rows, std::size_t D, double eps,
                  std::size_t r0, std::size_t r1) {
    narrow_forward_rows(x, w, y, rrms, rows, D, eps, r0, r1);
}
XG_KERNEL_CLONES void backward_rows(const double* x, const double* g, const double* w, const double* rrms, double* dx, double* dw,
                                    std::size_t rows, std::size_t D, std::size_t r0, std::size_t r1) {
    backward_rows_of(x, g, w, rrms, dx, dw, rows, D, r0, r1);
}
template <class T>
XG_KERNEL_INLINE void narrow_backward_rows(const T* x, const T* g, const T* w, const double* rrms, T* dx, double* dw, std::size_t rows,
                                           std::size_t D, std::size_t r0, std::size_t r1) {
    if (D == 1) {
        backward_rows_of<T, double>(x, g, w, rrms, dx, dw, rows, D, r0, r1);
    } else {
        backward_rows_of<T, float>(x, g, w, rrms, dx, dw, rows, D, r0, r1);
    }
}
XG_KERNEL_CLONES void backward_rows(const float* x, const float* g, const float* w, const double* rrms, float* dx, double* dw,
                                    std::size_t rows, std::size_t D, std::size_t r0, std::size_t r1) {
    narrow_backward_rows(x, g, w, rrms, dx, dw, rows, D, r0, r1);
}
void backward_rows(const bfloat16* x, const bfloat16* g, const bfloat16* w, const double* rrms, bfloat16* dx, double* dw,
                   std::size_t rows, std::size_t D, std::size_t r0, std::size_t r1) {
    narrow_backward_rows(x, g, w, rrms, dx, dw, rows, D, r0, r1);
}

}  // namespace

template <class T>
void rms_norm_forward(const T* x, const T* w, T* y, double* rrms, std::size_t rows, std::size_t D, double eps) {
    xg::detail::parallel_for(rows, D, [&](std::size_t r0, std::size_t r1) { forward_rows(x, w, y, rrms, rows, D, eps, r0, r1); });
}

template <class T>
void rms_norm_backward(const T* x, const T* g, const T* w, const double* rrms, T* dx, double* dw, std::size_t rows,
                       std::size_t D) {
    xg::detail::sums_over_chunks(rows, D, D, dw, nullptr, [&](std::size_t r0, std::size_t r1, double* dw_part, double*) {
        backward_rows(x, g, w, rrms, dx, dw_part, rows, D, r0, r1);
    });
}

XG_FOR_EACH_STORAGE_TYPE(XG_RMS_NORM_KERNELS)

}  // namespace xg::nn::fast
