// Matrix products through BLAS dgemm (core/ops/gemm.hpp), 2-D and batched with broadcast batch axes;
// 1-D operands follow PyTorch's rules (a row on the left, a column on the right). Two float32
// operands take sgemm on their float32 storage (no float64 mirror), forward and backward.
#include <functional>
#include <memory>
#include <numeric>

#include <fmt/format.h>

#include "core/ops/gemm.hpp"
#include "core/ops/ops.hpp"
#include "core/fast/strided.hpp"

namespace xg {

namespace {

using detail::gemm;

struct BatchPlan {
    Shape batch;                     // broadcast batch shape of the output
    std::vector<std::size_t> a_off;  // per output matrix: which matrix of a (index, not elements)
    std::vector<std::size_t> b_off;
};

BatchPlan plan_batches(const Shape& a, const Shape& b) {
    const Shape ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
    BatchPlan p;
    try {
        p.batch = broadcast_shapes(ba, bb, "matmul");
    } catch (const Error&) {  // rethrown with the full shapes: the batch axes alone do not say which operands
        fail("matmul", fmt::format("batch axes of {} and {} cannot be broadcast together", shape_str(a), shape_str(b)));
    }
    const Strides sa = broadcast_strides(ba, p.batch), sb = broadcast_strides(bb, p.batch);
    for_each_index2(p.batch, sa, sb, [&](std::size_t, std::size_t ia, std::size_t ib) {
        p.a_off.push_back(ia);
        p.b_off.push_back(ib);
    });
    return p;
}

// dA = dC @ B^T, dB = A^T @ dC, each summed over the batch axes its operand was broadcast along
std::vector<Tensor> matmul_backward(const BackwardContext& c) {
    return {c.needs_grad(0) ? sum_to(matmul(c.grad, transpose(c.input(1), -1, -2)), c.input_shape(0)) : Tensor(),
            c.needs_grad(1) ? sum_to(matmul(transpose(c.input(0), -1, -2), c.grad), c.input_shape(1)) : Tensor()};
}

// The float32 kernel: sgemm on the float32 storage (float32 accumulation inside BLAS, as libtorch;
// docs/precision.md, "Matrix products in float32"). Its backward takes the transposes as BLAS
// flags instead of copies, and sums a broadcast operand's gradient over the batch by GEMMs with
// beta = 1 into one float32 buffer, in batch order (the same order at every thread count).
Tensor matmul_float32(const Tensor& a, const Tensor& b, std::shared_ptr<const BatchPlan> p, std::size_t m, std::size_t k,
                      std::size_t n, Shape out_shape) {
    FloatArray out = FloatArray::from_shape(out_shape);
    const float *pa = a.values<float>().data(), *pb = b.values<float>().data();
    for (std::size_t i = 0; i < p->a_off.size(); ++i) {
        gemm(pa + p->a_off[i] * m * k, m, k, false, pb + p->b_off[i] * k * n, k, n, false, out.data() + i * m * n, 0.0f);
    }
    return record("matmul", std::move(out), {a, b}, [p, m, k, n](const GradContext& c) -> Grads {
        Grads g(2);
        const float* pg = c.grad32().data();
        const std::size_t count = p->a_off.size();
        // An operand with a matrix per output matrix (not broadcast) takes each GEMM once: beta = 0
        // into an uninitialised buffer, with no zeroing pass and no read of it.
        const auto gradient_buffer = [count](const Shape& shape, std::size_t matrix_size, float& beta) {
            const bool broadcast = std::accumulate(shape.begin(), shape.end(), std::size_t{1}, std::multiplies<>()) != count * matrix_size;
            beta = broadcast ? 1.0f : 0.0f;
            return broadcast ? FloatArray(xt::zeros<float>(shape)) : FloatArray::from_shape(shape);
        };
        if (c.needs_grad(0)) {  // dA_i (m, k) += dC_i (m, n) @ B_i^T
            const float* pb = c.input32(1).data();
            float beta = 1.0f;
            FloatArray ga = gradient_buffer(c.input_shape(0), m * k, beta);
            for (std::size_t i = 0; i < count; ++i) {
                gemm(pg + i * m * n, m, n, false, pb + p->b_off[i] * k * n, k, n, true, ga.data() + p->a_off[i] * m * k,
                     beta);
            }
            g[0] = std::move(ga);
        }
        if (c.needs_grad(1)) {  // dB_i (k, n) += A_i^T (k, m) @ dC_i (m, n)
            const float* pa = c.input32(0).data();
            float beta = 1.0f;
            FloatArray gb = gradient_buffer(c.input_shape(1), k * n, beta);
            for (std::size_t i = 0; i < count; ++i) {
                gemm(pa + p->a_off[i] * m * k, m, k, true, pg + i * m * n, m, n, false, gb.data() + p->b_off[i] * k * n,
                     beta);
            }
            g[1] = std::move(gb);
        }
        return g;
    }, {}, matmul_backward);
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
    const Shape sa = a.shape(), sb = b.shape();
    if (sa.empty() || sb.empty()) {
        fail("matmul", fmt::format("both arguments need at least 1 dimension, got {} and {}", shape_str(sa), shape_str(sb)));
    }
    if (sa.size() == 1 || sb.size() == 1) {
        // PyTorch's rule: a 1-D left operand is a row (1, k), a 1-D right operand a column (k, 1),
        // and the axis added for it is removed from the result ((k,) @ (k,) is a 0-D dot product).
        const std::size_t ka = sa.back(), kb = sb.size() == 1 ? sb[0] : sb[sb.size() - 2];
        if (ka != kb) {
            fail("matmul", fmt::format("inner dimensions differ: {} @ {} ({} vs {})", shape_str(sa), shape_str(sb), ka, kb));
        }
        Tensor out = matmul(sa.size() == 1 ? unsqueeze(a, 0) : a, sb.size() == 1 ? unsqueeze(b, -1) : b);
        if (sb.size() == 1) out = squeeze(out, -1);
        if (sa.size() == 1) out = squeeze(out, sb.size() == 1 ? -1 : -2);
        return out;
    }
    const std::size_t m = sa[sa.size() - 2], k = sa.back(), k2 = sb[sb.size() - 2], n = sb.back();
    if (k != k2) {
        fail("matmul", fmt::format("inner dimensions differ: {} @ {} ({} vs {})", shape_str(sa), shape_str(sb), k, k2));
    }
    BatchPlan p = plan_batches(sa, sb);
    Shape so = p.batch;
    so.push_back(m);
    so.push_back(n);
    if (a.dtype() == kFloat32 && b.dtype() == kFloat32) {
        return matmul_float32(a, b, std::make_shared<const BatchPlan>(std::move(p)), m, k, n, std::move(so));
    }
    Array out = empty_array(so);
    const double *pa = a.value().data(), *pb = b.value().data();
    for (std::size_t i = 0; i < p.a_off.size(); ++i) {
        gemm(pa + p.a_off[i] * m * k, m, k, false, pb + p.b_off[i] * k * n, k, n, false, out.data() + i * m * n, 0.0);
    }
    return record("matmul", std::move(out), {a, b}, matmul_backward);
}

}  // namespace xg
