// Matrix products through BLAS (core/ops/gemm.hpp): dgemm on float64 storage, sgemm on float32
// storage (no float64 mirror), 2-D and batched with broadcast batch axes; 1-D operands follow
// PyTorch's rules (a row on the left, a column on the right). Every product, forward and
// backward, is one op: indexed_gemm (core/ops/indexed_gemm.hpp), whose derivative is written once.
#include <algorithm>
#include <memory>
#include <numeric>
#include <utility>

#include <fmt/format.h>

#include "core/ops/gemm.hpp"
#include "core/ops/indexed_gemm.hpp"
#include "core/ops/ops.hpp"
#include "core/fast/strided.hpp"

namespace xg {

namespace detail {

namespace {

// The number of matrices of a stack: the product of its leading axes (not numel / matrix size,
// which an empty matrix would leave undefined).
std::size_t matrix_count(const Shape& s) {
    return std::accumulate(s.begin(), s.end() - 2, std::size_t{1}, std::multiplies<>());
}

// The forward of indexed_gemm on one storage type T: one GEMM per product, in order, with beta = 0
// for the first product into its output matrix and beta = 1 after it.
template <class T>
xt::xarray<T> indexed_products(const xt::xarray<T>& a, bool ta, const std::vector<std::size_t>& ai, const xt::xarray<T>& b,
                               bool tb, const std::vector<std::size_t>& bi, const std::vector<std::size_t>& ci,
                               const Shape& out_shape) {
    const std::size_t a_rows = a.shape()[a.dimension() - 2], a_cols = a.shape()[a.dimension() - 1];
    const std::size_t b_rows = b.shape()[b.dimension() - 2], b_cols = b.shape()[b.dimension() - 1];
    const std::size_t out_size = out_shape[out_shape.size() - 2] * out_shape.back();
    xt::xarray<T> out = empty_storage<T>(out_shape);
    std::vector<bool> written(matrix_count(out_shape), false);
    const T *pa = a.data(), *pb = b.data();
    for (std::size_t i = 0; i < ci.size(); ++i) {
        const T beta = written[ci[i]] ? T(1) : T(0);
        written[ci[i]] = true;
        gemm(pa + ai[i] * a_rows * a_cols, a_rows, a_cols, ta, pb + bi[i] * b_rows * b_cols, b_rows, b_cols, tb,
             out.data() + ci[i] * out_size, beta);
    }
    for (std::size_t j = 0; j < written.size(); ++j) {  // only when an output matrix meets no product
        if (!written[j]) std::fill_n(out.data() + j * out_size, out_size, T(0));
    }
    return out;
}

}  // namespace

Tensor indexed_gemm(const GemmOperand& a, const GemmOperand& b, MatrixIndices c, const Shape& out_shape, bool of_gradient) {
    const bool ta = a.transposed, tb = b.transposed;
    MatrixIndices ai = a.index, bi = b.index;
    return on_storage(a.stack, b.stack, [&](const auto& va, const auto& vb) {
        auto value = indexed_products(va, ta, *ai, vb, tb, *bi, *c, out_shape);  // C[c] (+)= op(A[a]) op(B[b])
        // dA[a] (+)= ta ? gemm(B[b], G[c], tb, T) : gemm(G[c], B[b], F, !tb); dB[b] (+)= tb ? gemm(G[c], A[a], T, ta) : gemm(A[a], G[c], !ta, F)
        return record(of_gradient ? "matmul_backward" : "matmul", std::move(value), {a.stack, b.stack},
                      [ta, tb, ai, bi, c](const BackwardContext& ctx) -> std::vector<Tensor> {
            const Tensor& g = ctx.grad;  // the transposed cases derived: docs/autograd.md, section 4
            std::vector<Tensor> grads(2);
            if (ctx.needs_grad(0)) {
                const Tensor bv = ctx.input(1);
                grads[0] = ta ? indexed_gemm({bv, tb, bi}, {g, true, c}, ai, ctx.input_shape(0), true)
                              : indexed_gemm({g, false, c}, {bv, !tb, bi}, ai, ctx.input_shape(0), true);
            }
            if (ctx.needs_grad(1)) {
                const Tensor av = ctx.input(0);
                grads[1] = tb ? indexed_gemm({g, true, c}, {av, ta, ai}, bi, ctx.input_shape(1), true)
                              : indexed_gemm({av, !ta, ai}, {g, false, c}, bi, ctx.input_shape(1), true);
            }
            return grads;
        });
    });
}

}  // namespace detail

namespace {

struct BatchPlan {
    Shape batch;                   // broadcast batch shape of the output
    detail::MatrixIndices a, b, c;  // per output matrix: which matrix of a, of b, and of the output
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
    std::vector<std::size_t> a_index, b_index;
    for_each_index2(p.batch, sa, sb, [&](std::size_t, std::size_t ia, std::size_t ib) {
        a_index.push_back(ia);
        b_index.push_back(ib);
    });
    std::vector<std::size_t> c_index(a_index.size());
    std::iota(c_index.begin(), c_index.end(), std::size_t{0});
    p.a = std::make_shared<const std::vector<std::size_t>>(std::move(a_index));
    p.b = std::make_shared<const std::vector<std::size_t>>(std::move(b_index));
    p.c = std::make_shared<const std::vector<std::size_t>>(std::move(c_index));
    return p;
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
    Shape so = std::move(p.batch);
    so.push_back(m);
    so.push_back(n);
    return detail::indexed_gemm({a, false, std::move(p.a)}, {b, false, std::move(p.b)}, std::move(p.c), so, false);
}

}  // namespace xg
