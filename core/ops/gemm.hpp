// Internal to the library: the one matrix-product helper, used by matmul (core/ops/linalg.cpp)
// and by nn's fused ops (linear, conv2d, the recurrent cells). Raw row-major buffers in, BLAS
// dgemm (float64) or sgemm (float32) through xtensor-blas. Not installed.
#pragma once

#include <cstddef>

namespace xg::detail {

/// C (m, n) = op(A) @ op(B) + beta * C on row-major buffers: A is (a_rows, a_cols), B is
/// (b_rows, b_cols), op transposes when asked. beta = 0 overwrites C (which may hold garbage).
/// Empty operands are handled here: BLAS rejects zero leading dimensions.
void gemm(const double* a, std::size_t a_rows, std::size_t a_cols, bool trans_a, const double* b, std::size_t b_rows,
          std::size_t b_cols, bool trans_b, double* c, double beta);
/// The same in float32 through sgemm: float32 storage AND float32 accumulation inside BLAS (the one
/// float32 kernel that does not widen between stores; docs/precision.md, "Matrix products in
/// float32"). The same fixed blocks as the float64 one, so its bits do not depend on the thread count.
void gemm(const float* a, std::size_t a_rows, std::size_t a_cols, bool trans_a, const float* b, std::size_t b_rows,
          std::size_t b_cols, bool trans_b, float* c, float beta);

}  // namespace xg::detail
