// Linear: y = x W^T + b as one graph node over (rows, in) @ (in, out): one kernel, a template on
// its storage type (BLAS dgemm on float64, sgemm when x, W and b are all float32: native float32
// storage, no float64 mirror of any of them), and the composed twin for create_graph.
// Derivation of the backward: docs/derivations/linear.md.
#include <algorithm>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "core/ops/composed_backward.hpp"
#include "core/fast/kernel_clones.hpp"
#include "core/ops/gemm.hpp"
#include "core/fast/strided.hpp"
#include "nn/functional/kernel_storage.hpp"
#include "nn/functional/affine.hpp"
#include "nn/functional/functional.hpp"

namespace xg::nn::functional {

namespace {

using xg::detail::gemm;
using xg::nn::detail::kernel_grad;
using xg::nn::detail::kernel_input;
using xg::nn::detail::kernel_values;

struct LinearDims {
    std::size_t rows, in, out;
    Shape out_shape;
};

LinearDims check_linear(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias) {
    if (!x.defined() || !weight.defined()) fail(op, "input and weight must be defined tensors");
    const Shape sx = x.shape(), sw = weight.shape();
    if (sw.size() != 2) fail(op, fmt::format("weight must be 2-D (out_features, in_features), got {}", shape_str(sw)));
    if (sx.empty()) fail(op, fmt::format("input must have at least 1 dimension, got a 0-D tensor (weight {})", shape_str(sw)));
    if (sx.back() != sw[1]) {
        fail(op, fmt::format("input {} has {} features in its last axis but weight {} expects in_features = {}",
                             shape_str(sx), sx.back(), shape_str(sw), sw[1]));
    }
    if (bias.defined() && bias.shape() != Shape{sw[0]}) {
        fail(op, fmt::format("bias must have shape ({},) to match weight {}, got {}", sw[0], shape_str(sw),
                             shape_str(bias.shape())));
    }
    LinearDims d{1, sw[1], sw[0], sx};
    for (std::size_t i = 0; i + 1 < sx.size(); ++i) d.rows *= sx[i];
    d.out_shape.back() = d.out;
    return d;
}

Backward linear_twin() {
    return through_composed(
        [](const std::vector<Tensor>& in) { return linear_composed(in[0], in[1], in.size() > 2 ? in[2] : Tensor()); });
}

// out[j] = sum over rows r of g[r][j], each column summed in double in row order and rounded once
// into T (for double: no rounding, the plain sum). Every column's sum has the same order at any
// vector width, so the AVX2 clone (4 doubles per vector instead of 2) gives the same bits.
template <class T>
XG_KERNEL_INLINE void column_sums_body(const T* g, std::size_t rows, std::size_t cols, T* out) {
    std::vector<double> widened;
    double* ps = nullptr;
    if constexpr (std::is_same_v<T, double>) {
        ps = out;  // summed in place: double is already the accumulator's type
    } else {
        widened.resize(cols);
        ps = widened.data();
    }
    std::fill_n(ps, cols, 0.0);
    for (std::size_t r = 0; r < rows; ++r) {
        const T* row = g + r * cols;
#pragma omp simd
        for (std::size_t j = 0; j < cols; ++j) ps[j] += static_cast<double>(row[j]);
    }
    if constexpr (!std::is_same_v<T, double>) {
        for (std::size_t j = 0; j < cols; ++j) out[j] = static_cast<T>(ps[j]);
    }
}
XG_KERNEL_CLONES void column_sums(const double* g, std::size_t rows, std::size_t cols, double* out) {
    column_sums_body(g, rows, cols, out);
}
XG_KERNEL_CLONES void column_sums(const float* g, std::size_t rows, std::size_t cols, float* out) {
    column_sums_body(g, rows, cols, out);
}
void column_sums(const bfloat16* g, std::size_t rows, std::size_t cols, bfloat16* out) { column_sums_body(g, rows, cols, out); }

// The kernel on storage T: dgemm for double, sgemm for float (float32 storage AND float32
// accumulation inside BLAS, as libtorch's float32 linear; the error this costs against float64
// accumulation is measured in docs/precision.md, "Matrix products in float32").
template <class T>
Tensor linear_kernel(const Tensor& x, const Tensor& weight, const Tensor& bias, const LinearDims& d) {
    xt::xarray<T> y = empty_storage<T>(d.out_shape);
    if (bias.defined()) {
        // Seed every row with the bias so a single gemm with beta = 1 finishes the job.
        const T* pb = kernel_values<T>(bias).data();
        T* py = y.data();
        for (std::size_t r = 0; r < d.rows; ++r) std::copy(pb, pb + d.out, py + r * d.out);
    }
    gemm(kernel_values<T>(x).data(), d.rows, d.in, false, kernel_values<T>(weight).data(), d.out, d.in, true, y.data(),
         bias.defined() ? T(1) : T(0));

    std::vector<Tensor> inputs{x, weight};
    if (bias.defined()) inputs.push_back(bias);
    // dx = dy W, dW = dy^T x (GEMM in T), db = sum of dy over rows (summed in double, rounded once into T)
    return record("linear", std::move(y), std::move(inputs), [d](const GradContext& c) -> Grads {
        Grads g(c.num_inputs());
        const T* pg = kernel_grad<T>(c).data();
        if (c.needs_grad(0)) {
            xt::xarray<T> gx = empty_storage<T>(c.input_shape(0));
            gemm(pg, d.rows, d.out, false, kernel_input<T>(c, 1).data(), d.out, d.in, false, gx.data(), T(0));
            g[0] = std::move(gx);
        }
        if (c.needs_grad(1)) {
            xt::xarray<T> gw = xt::xarray<T>::from_shape({d.out, d.in});
            gemm(pg, d.rows, d.out, true, kernel_input<T>(c, 0).data(), d.rows, d.in, false, gw.data(), T(0));
            g[1] = std::move(gw);
        }
        if (c.num_inputs() > 2 && c.needs_grad(2)) {
            // A float64 accumulator: a float32 running sum over `rows` rows drifts by up to rows * u
            // of the row magnitudes, float64 keeps the one rounding of the store; the pass is bound by
            // reading dy either way (docs/precision.md, "Matrix products in float32").
            xt::xarray<T> gb = xt::xarray<T>::from_shape({d.out});
            column_sums(pg, d.rows, d.out, gb.data());
            g[2] = std::move(gb);
        }
        return g;
    }, {}, linear_twin());
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
    const LinearDims d = check_linear("linear", x, weight, bias);
    // the storage of x, W and b when they share a dtype (no float64 mirror of any of them), float64
    // otherwise (a narrower operand read through its mirror)
    return detail::on_common_storage(x, {&weight, &bias}, [&](auto storage) {
        return linear_kernel<typename decltype(storage)::type>(x, weight, bias, d);
    });
}

Tensor linear_composed(const Tensor& x, const Tensor& weight, const Tensor& bias) {
    check_linear("linear_composed", x, weight, bias);
    const bool vector_input = x.dim() == 1;  // matmul needs a matrix: treat (in,) as (1, in)
    Tensor y = matmul(vector_input ? unsqueeze(x, 0) : x, transpose(weight, 0, 1));
    if (vector_input) y = squeeze(y, 0);
    return bias.defined() ? y + bias : y;
}

}  // namespace xg::nn::functional
