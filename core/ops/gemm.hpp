// Internal to the library: the one matrix-product helper, used by matmul (core/ops/linalg.cpp)
// and by nn's fused ops (linear, conv2d, the recurrent cells). Raw row-major buffers in, BLAS
// dgemm through xtensor-blas. Not installed.
#pragma once

#include <cstddef>

namespace xg::detail {

/// C (m, n) = op(A) @ op(B) + beta * C on row-major buffers: A is (a_rows, a_cols), B is
/// (b_rows, b_cols), op transposes when asked. beta = 0 overwrites C (which may hold garbage).
/// Empty operands are handled here: BLAS rejects zero leading dimensions.
void gemm(const double* a, std::size_t a_rows, std::size_t a_cols, bool trans_a, const double* b, std::size_t b_rows,
          std::size_t b_cols, bool trans_b, double* c, double beta);

}  // namespace xg::detail
