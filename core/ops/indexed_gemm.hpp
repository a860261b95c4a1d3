// Internal to the library: the one differentiable matrix-product op under xg::matmul. A list of
// products between matrices picked by index from two stacks, each written into (or added onto) a
// matrix of the output stack; its backward is two more such lists, so create_graph
// differentiates it to any order. Storage-generic (dgemm on float64, sgemm on float32 storage,
// core/ops/gemm.hpp). Not installed.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "core/engine/tensor.hpp"

namespace xg::detail {

/// Which matrix of a stack (its index over the leading axes, not an element offset), one entry
/// per product. Shared: a backward reuses the forward's lists in another order, without copies.
using MatrixIndices = std::shared_ptr<const std::vector<std::size_t>>;

/// One operand of indexed_gemm: a stack of matrices (its last two axes; the leading ones count
/// the matrices), whether each is used transposed, and which matrix each product reads.
struct GemmOperand {
    Tensor stack;
    bool transposed;
    MatrixIndices index;
};

/// C[c[i]] (+)= op(A[a.index[i]]) @ op(B[b.index[i]]) for every i, in order; C has `out_shape`
/// (leading axes: the output matrices). The first product written into a matrix of C overwrites
/// it (GEMM beta = 0, no zeroing pass), later ones add onto it (beta = 1): a sum over a batch is
/// made by GEMM itself in batch order, the same bits at any thread count; a matrix of C no
/// product writes is 0. Runs on the operands' storage (on_storage: float32 operands take sgemm,
/// mixed dtypes compute in float64). Recorded as `of_gradient ? "matmul_backward" : "matmul"`:
/// the forward of matmul, or a product its backward makes. The shapes are the caller's to check
/// (xg::matmul checks its arguments and names them in its errors).
Tensor indexed_gemm(const GemmOperand& a, const GemmOperand& b, MatrixIndices c, const Shape& out_shape,
                    bool of_gradient);

}  // namespace xg::detail
