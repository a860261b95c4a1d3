// Linear: y = x W^T + b as one graph node over (rows, in) @ (in, out) through BLAS dgemm, or sgemm
// when x, W and b are all float32 (native float32 storage: no float64 mirror of any of them).
// Derivation of the backward: docs/derivations/linear.md.
#include <algorithm>

#include <fmt/format.h>

#include "core/ops/composed_backward.hpp"
#include "core/fast/kernel_clones.hpp"
#include "core/ops/gemm.hpp"
#include "nn/functional/functional.hpp"

namespace xg::nn::functional {

namespace {

using xg::detail::gemm;

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

bool all_float32(const Tensor& x, const Tensor& weight, const Tensor& bias) {
    return x.dtype() == kFloat32 && weight.dtype() == kFloat32 && (!bias.defined() || bias.dtype() == kFloat32);
}

Backward linear_twin() {
    return through_composed([](const std::vector<Tensor>& in) { return linear_composed(in[0], in[1], in.size() > 2 ? in[2] : Tensor()); });
}

// out[j] = sum over rows r of g[r][j], each column summed in double in row order and rounded once.
// Every column's sum has the same order at any vector width, so the AVX2 clone (4 doubles per
// vector instead of 2) gives the same bits.
XG_KERNEL_CLONES void column_sums_widened(const float* g, std::size_t rows, std::size_t cols, float* out) {
    std::vector<double> sum(cols, 0.0);
    double* ps = sum.data();
    for (std::size_t r = 0; r < rows; ++r) {
        const float* row = g + r * cols;
#pragma omp simd
        for (std::size_t j = 0; j < cols; ++j) ps[j] += static_cast<double>(row[j]);
    }
    for (std::size_t j = 0; j < cols; ++j) out[j] = static_cast<float>(ps[j]);
}

// The float32 kernel: sgemm reads and writes float32 storage and accumulates in float32 inside BLAS
// (as libtorch's float32 linear does; the error this costs against float64 accumulation is measured
// in docs/precision.md, "Matrix products in float32").
Tensor linear_float32(const Tensor& x, const Tensor& weight, const Tensor& bias, const LinearDims& d) {
    FloatArray y = FloatArray::from_shape(d.out_shape);
    if (bias.defined()) {
        const float* pb = bias.values<float>().data();
        float* py = y.data();
        for (std::size_t r = 0; r < d.rows; ++r) std::copy(pb, pb + d.out, py + r * d.out);
    }
    gemm(x.values<float>().data(), d.rows, d.in, false, weight.values<float>().data(), d.out, d.in, true, y.data(),
         bias.defined() ? 1.0f : 0.0f);

    std::vector<Tensor> inputs{x, weight};
    if (bias.defined()) inputs.push_back(bias);
    // dx = dy W, dW = dy^T x (sgemm), db = sum of dy over rows (summed in float64, rounded once)
    return record("linear", std::move(y), std::move(inputs), [d](const GradContext& c) -> Grads {
        Grads g(c.num_inputs());
        const float* pg = c.grad32().data();
        if (c.needs_grad(0)) {
            FloatArray gx = FloatArray::from_shape(c.input_shape(0));
            gemm(pg, d.rows, d.out, false, c.input32(1).data(), d.out, d.in, false, gx.data(), 0.0f);
            g[0] = std::move(gx);
        }
        if (c.needs_grad(1)) {
            FloatArray gw = FloatArray::from_shape({d.out, d.in});
            gemm(pg, d.rows, d.out, true, c.input32(0).data(), d.rows, d.in, false, gw.data(), 0.0f);
            g[1] = std::move(gw);
        }
        if (c.num_inputs() > 2 && c.needs_grad(2)) {
            // A float64 accumulator: a float32 running sum over `rows` rows drifts by up to rows * u
            // of the row magnitudes, float64 keeps the one rounding of the store; the pass is bound by
            // reading dy either way (docs/precision.md, "Matrix products in float32").
            FloatArray gb = FloatArray::from_shape({d.out});
            column_sums_widened(pg, d.rows, d.out, gb.data());
            g[2] = std::move(gb);
        }
        return g;
    }, {}, linear_twin());
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
    const LinearDims d = check_linear("linear", x, weight, bias);
    if (all_float32(x, weight, bias)) return linear_float32(x, weight, bias, d);
    Array y = empty_array(d.out_shape);
    if (bias.defined()) {
        // Seed every row with the bias so a single gemm with beta = 1 finishes the job.
        const double* pb = bias.data();
        double* py = y.data();
        for (std::size_t r = 0; r < d.rows; ++r) std::copy(pb, pb + d.out, py + r * d.out);
    }
    gemm(x.data(), d.rows, d.in, false, weight.data(), d.out, d.in, true, y.data(), bias.defined() ? 1.0 : 0.0);

    std::vector<Tensor> inputs{x, weight};
    if (bias.defined()) inputs.push_back(bias);
    // dx = dy W, dW = dy^T x, db = sum of dy over rows
    return record("linear", std::move(y), std::move(inputs), [d](const GradContext& c) -> Grads {
        Grads g(c.num_inputs());
        const double* pg = c.grad.data();
        if (c.needs_grad(0)) {
            Array gx = empty_array(c.input_shape(0));
            gemm(pg, d.rows, d.out, false, c.input(1).data(), d.out, d.in, false, gx.data(), 0.0);
            g[0] = std::move(gx);
        }
        if (c.needs_grad(1)) {
            Array gw = Array::from_shape({d.out, d.in});
            gemm(pg, d.rows, d.out, true, c.input(0).data(), d.rows, d.in, false, gw.data(), 0.0);
            g[1] = std::move(gw);
        }
        if (c.num_inputs() > 2 && c.needs_grad(2)) {
            Array gb = xt::zeros<double>({d.out});
            double* pb = gb.data();
            for (std::size_t r = 0; r < d.rows; ++r) {
                const double* row = pg + r * d.out;
#pragma omp simd
                for (std::size_t j = 0; j < d.out; ++j) pb[j] += row[j];
            }
            g[2] = std::move(gb);
        }
        return g;
    }, {}, linear_twin());
}

Tensor linear_composed(const Tensor& x, const Tensor& weight, const Tensor& bias) {
    check_linear("linear_composed", x, weight, bias);
    const bool vector_input = x.dim() == 1;  // matmul needs a matrix: treat (in,) as (1, in)
    Tensor y = matmul(vector_input ? unsqueeze(x, 0) : x, transpose(weight, 0, 1));
    if (vector_input) y = squeeze(y, 0);
    return bias.defined() ? y + bias : y;
}

}  // namespace xg::nn::functional
