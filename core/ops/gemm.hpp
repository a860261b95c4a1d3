// Internal to the library: the one matrix-product helper, used by matmul (core/ops/linalg.cpp)
// and by nn's fused ops (linear, conv2d, the recurrent cells). Raw row-major buffers in, BLAS
// dgemm (float64) or sgemm (float32) through xtensor-blas; bfloat16 widens into sgemm. Not installed.
#pragma once

#include <cstddef>

#include "core/engine/bfloat16.hpp"

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
/// The same for bfloat16 storage: BLAS has no bfloat16 product, so A, B (and C when beta is not
/// 0) are widened exactly into float buffers, multiplied by the float32 gemm above (float
/// accumulation) and C is rounded once into bfloat16.
void gemm(const bfloat16* a, std::size_t a_rows, std::size_t a_cols, bool trans_a, const bfloat16* b, std::size_t b_rows,
          std::size_t b_cols, bool trans_b, bfloat16* c, bfloat16 beta);

/// C (m, n) = alpha op(A) op(B) + beta C as ONE BLAS call on the calling thread, on row-major
/// matrices inside larger buffers: lda, ldb, ldc are the distances between their rows. For the
/// many small products of a fused op (attention's per-head products), which share their work
/// between threads product by product, so each product's bits do not depend on the thread count.
void gemm_one_call(const double* a, std::size_t lda, bool trans_a, const double* b, std::size_t ldb, bool trans_b,
                   double* c, std::size_t ldc, std::size_t m, std::size_t n, std::size_t k, double alpha, double beta);
void gemm_one_call(const float* a, std::size_t lda, bool trans_a, const float* b, std::size_t ldb, bool trans_b, float* c,
                   std::size_t ldc, std::size_t m, std::size_t n, std::size_t k, float alpha, float beta);
/// bfloat16 storage, widened into float buffers as gemm's.
void gemm_one_call(const bfloat16* a, std::size_t lda, bool trans_a, const bfloat16* b, std::size_t ldb, bool trans_b,
                   bfloat16* c, std::size_t ldc, std::size_t m, std::size_t n, std::size_t k, bfloat16 alpha, bfloat16 beta);

}  // namespace xg::detail
