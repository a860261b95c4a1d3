// T = double: dgemm; T = float: sgemm on the float32 storage, so the products' sums are float32
// accumulations inside BLAS (as matmul and F::linear in float32: docs/precision.md, "Matrix
// products in float32"), and so are col2im's additions of the taps that reach one input value; the
// sample chunks' weight gradients and the bias gradient are added in double and rounded once.
#include "nn/fast/conv.hpp"

#include <algorithm>
#include <memory>
#include <type_traits>
#include <vector>

#include "core/fast/parallel.hpp"
#include "core/engine/dtype.hpp"
#include "core/ops/gemm.hpp"

namespace xg::nn::fast {

namespace {

using detail::ConvDims;
using detail::Window2d;
using xg::detail::gemm;

// A thread's (or a chunk's) im2col matrices, not zeroed: im2col and the GEMM with beta = 0 write
// every element (a zero-filled vector per chunk had cost a memset of the whole buffer each).
template <class T>
std::unique_ptr<T[]> column_buffer(const ConvDims& d) { return std::unique_ptr<T[]>(new T[d.G * d.K * d.L]); }

// Output positions [first, last) whose input coordinate pos * stride + offset lies in [0, extent).
struct Span {
    std::size_t first, last;
};
Span inside(std::size_t outputs, std::size_t stride, long offset, std::size_t extent) {
    const long s = static_cast<long>(stride), e = static_cast<long>(extent);
    const long first = offset >= 0 ? 0 : (-offset + s - 1) / s;
    const long last = e <= offset ? 0 : (e - offset + s - 1) / s;
    const long n = static_cast<long>(outputs);
    return {static_cast<std::size_t>(std::min(first, n)), static_cast<std::size_t>(std::clamp(last, std::min(first, n), n))};
}

// col[(c KH + i) KW + j][oh OW + ow] = x[c][oh sh - ph + i dh][ow sw - pw + j dw], 0 in the padding.
template <class T>
void im2col(const T* x, std::size_t channels, const Window2d& w, T* col) {
    for (std::size_t c = 0; c < channels; ++c) {
        const T* plane = x + c * w.H * w.W;
        for (std::size_t i = 0; i < w.kh; ++i) {
            for (std::size_t j = 0; j < w.kw; ++j) {
                T* out = col + ((c * w.kh + i) * w.kw + j) * w.out_area();
                const Span cols = inside(w.OW, w.sw, w.col(0, j), w.W);
                for (std::size_t oh = 0; oh < w.OH; ++oh) {
                    T* row = out + oh * w.OW;
                    const long r = w.row(oh, i);
                    if (r < 0 || r >= static_cast<long>(w.H)) {
                        std::fill(row, row + w.OW, T(0));
                        continue;
                    }
                    const T* in = plane + static_cast<std::size_t>(r) * w.W;
                    std::fill(row, row + cols.first, T(0));
                    for (std::size_t ow = cols.first; ow < cols.last; ++ow) row[ow] = in[w.col(ow, j)];
                    std::fill(row + cols.last, row + w.OW, T(0));
                }
            }
        }
    }
}

// The transpose of im2col: dx[c][oh sh - ph + i dh][ow sw - pw + j dw] += dcol[(c KH + i) KW + j][oh OW + ow].
template <class T>
void col2im(const T* dcol, std::size_t channels, const Window2d& w, T* dx) {
    using A = ArithmeticOf<T>;  // bfloat16 adds in float, rounding each sum once
    for (std::size_t c = 0; c < channels; ++c) {
        T* plane = dx + c * w.H * w.W;
        for (std::size_t i = 0; i < w.kh; ++i) {
            for (std::size_t j = 0; j < w.kw; ++j) {
                const T* in = dcol + ((c * w.kh + i) * w.kw + j) * w.out_area();
                const Span cols = inside(w.OW, w.sw, w.col(0, j), w.W);
                for (std::size_t oh = 0; oh < w.OH; ++oh) {
                    const long r = w.row(oh, i);
                    if (r < 0 || r >= static_cast<long>(w.H)) continue;
                    T* out = plane + static_cast<std::size_t>(r) * w.W;
                    for (std::size_t ow = cols.first; ow < cols.last; ++ow) out[w.col(ow, j)] = T(A(out[w.col(ow, j)]) + A(in[oh * w.OW + ow]));
                }
            }
        }
    }
}

}  // namespace

template <class T>
void conv2d_forward(const T* x, const T* w, const T* b, T* y, const ConvDims& d) {
    const std::size_t in_size = d.C * d.win.H * d.win.W, out_size = d.O * d.L;
    // Samples are independent: each thread takes a block of them, with its own im2col buffer.
    xg::detail::parallel_for(d.N, in_size + out_size + d.G * d.K * d.L, [&](std::size_t first, std::size_t last) {
        const std::unique_ptr<T[]> col = column_buffer<T>(d);
        for (std::size_t n = first; n < last; ++n) {
            im2col(x + n * in_size, d.C, d.win, col.get());
            T* yn = y + n * out_size;
            for (std::size_t o = 0; o < d.O && b != nullptr; ++o) std::fill(yn + o * d.L, yn + (o + 1) * d.L, b[o]);
            // y_g (Og, L) = W_g (Og, K) @ col_g (K, L) [+ b]
            for (std::size_t g = 0; g < d.G; ++g) {
                gemm(w + g * d.Og * d.K, d.Og, d.K, false, col.get() + g * d.K * d.L, d.K, d.L, false, yn + g * d.Og * d.L,
                     T(b != nullptr ? 1 : 0));
            }
        }
    });
}

// dW_g = sum_n dy_g col_g^T, dx = col2im(W_g^T dy_g), db = sum of dy over N, OH, OW
template <class T>
void conv2d_backward(const T* x, const T* w, const T* dy_all, T* dx, T* dw, T* db, const ConvDims& d) {
    const std::size_t in_size = d.C * d.win.H * d.win.W, out_size = d.O * d.L;
    // Samples [first, last): their dW terms into dw_part (if given), their dx in place.
    const auto samples = [&](std::size_t first, std::size_t last, T* dw_part) {
        const std::unique_ptr<T[]> col = column_buffer<T>(d);
        for (std::size_t n = first; n < last; ++n) {
            const T* dy = dy_all + n * out_size;
            if (dw_part != nullptr) {
                im2col(x + n * in_size, d.C, d.win, col.get());
                for (std::size_t g = 0; g < d.G; ++g) {
                    gemm(dy + g * d.Og * d.L, d.Og, d.L, false, col.get() + g * d.K * d.L, d.K, d.L, true,
                         dw_part + g * d.Og * d.K, T(1));
                }
            }
            if (dx != nullptr) {
                for (std::size_t g = 0; g < d.G; ++g) {
                    gemm(w + g * d.Og * d.K, d.Og, d.K, true, dy + g * d.Og * d.L, d.Og, d.L, false,
                         col.get() + g * d.K * d.L, T(0));
                }
                col2im(col.get(), d.C, d.win, dx + n * in_size);
            }
        }
    };
    // dW is a sum over samples: fixed chunks of them, added in order (core/fast/parallel.hpp), so the
    // bits do not depend on the thread count; dx is per sample.
    const std::size_t cost = in_size + out_size + d.G * d.K * d.L;
    const std::size_t dw_size = d.O * d.K;
    if (dw != nullptr) {
        if constexpr (std::is_same_v<T, double>) {
            xg::detail::sums_over_chunks(d.N, cost, dw_size, dw, nullptr,
                                         [&](std::size_t first, std::size_t last, double* dw_part, double*) { samples(first, last, dw_part); });
        } else {
            // a chunk's samples summed by sgemm into a float partial, the chunks' partials added in
            // double and dw rounded once
            std::vector<double> dw_sum(dw, dw + dw_size);
            xg::detail::sums_over_chunks(d.N, cost, dw_size, dw_sum.data(), nullptr,
                                         [&](std::size_t first, std::size_t last, double* dw_part, double*) {
                                             std::vector<T> part(dw_size, T(0));
                                             samples(first, last, part.data());
                                             for (std::size_t k = 0; k < dw_size; ++k) dw_part[k] += double(part[k]);
                                         });
            for (std::size_t k = 0; k < dw_size; ++k) dw[k] = T(dw_sum[k]);
        }
    } else if (dx != nullptr) {
        xg::detail::parallel_for(d.N, cost, [&](std::size_t first, std::size_t last) { samples(first, last, nullptr); });
    }
    if (db != nullptr) {
        std::vector<double> db_sum(db, db + d.O);  // double sums, db rounded once
        for (std::size_t n = 0; n < d.N; ++n) {
            for (std::size_t o = 0; o < d.O; ++o) {
                const T* dy = dy_all + n * out_size + o * d.L;
                double s = 0.0;
                for (std::size_t l = 0; l < d.L; ++l) s += double(dy[l]);
                db_sum[o] += s;
            }
        }
        for (std::size_t o = 0; o < d.O; ++o) db[o] = T(db_sum[o]);
    }
}

XG_FOR_EACH_STORAGE_TYPE(XG_CONV_KERNELS)

}  // namespace xg::nn::fast
