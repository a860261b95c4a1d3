#include "core/ops/gemm.hpp"

#include <algorithm>
#include <thread>
#include <vector>

#include <xtensor-blas/xblas.hpp>

#include "core/fast/parallel.hpp"

namespace xg::detail {

namespace {

// One OpenBLAS call (OpenBLAS itself on one thread) on row-major operands with leading dimensions.
template <class T>
void blas_gemm(const T* a, std::size_t lda, bool trans_a, const T* b, std::size_t ldb, bool trans_b, T* c,
               std::size_t ldc, std::size_t m, std::size_t n, std::size_t k, T beta, T alpha = T(1)) {
    using Index = xt::blas_index_t;
    cxxblas::gemm<Index>(cxxblas::StorageOrder::RowMajor, trans_a ? cxxblas::Transpose::Trans : cxxblas::Transpose::NoTrans,
                         trans_b ? cxxblas::Transpose::Trans : cxxblas::Transpose::NoTrans, static_cast<Index>(m),
                         static_cast<Index>(n), static_cast<Index>(k), alpha, a, static_cast<Index>(lda), b,
                         static_cast<Index>(ldb), beta, c, static_cast<Index>(ldc));
}

// C = beta C for an empty inner dimension, which BLAS rejects (zero leading dimensions); c may be
// uninitialised when beta = 0.
template <class T>
void scale_without_product(T* c, std::size_t ldc, std::size_t m, std::size_t n, T beta) {
    for (std::size_t i = 0; i < m; ++i) {
        for (std::size_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    }
}

// Threads split C into blocks of whole rows (or, for a wide and short C, whole columns). The blocks
// depend on the shape and on the machine's core count, never on the thread count, and every block
// is one one-thread BLAS call, so each element of C comes out of the same call with the same bits
// however many threads share the blocks. OpenBLAS's own threads would not give that: its split
// follows its thread count, and the edge tiles of a split round differently (measured: 1 vs 3
// threads differ). No more blocks than the machine has cores: each block packs B (or A) again,
// which cost a product 12-23 % in 8 blocks with OpenBLAS's Haswell and SkylakeX kernels, 3-5 % in 2
// (docs/performance.md, "Threads and determinism").
constexpr std::size_t kMinBlock = 64;   // rows (or columns) per block: B (or A) is packed once per block
constexpr std::size_t kMaxBlocks = 8;
constexpr std::size_t kMinFlopsToSplit = std::size_t{1} << 20;

// The cores online (not the affinity mask, not the thread count set): fixed for the machine.
std::size_t machine_cores() {
    static const std::size_t cores = std::max(1u, std::thread::hardware_concurrency());
    return cores;
}

FixedChunks gemm_blocks(std::size_t m, std::size_t n, std::size_t k) {
    const std::size_t along = std::max(m, n);
    if (m * n * k < kMinFlopsToSplit) return {along, 1};
    return {along, std::clamp<std::size_t>(along / kMinBlock, 1, std::min(kMaxBlocks, machine_cores()))};
}

template <class T>
void gemm_blocked(const T* a, std::size_t a_rows, std::size_t a_cols, bool trans_a, const T* b, std::size_t b_rows,
                  std::size_t b_cols, bool trans_b, T* c, T beta) {
    const std::size_t m = trans_a ? a_cols : a_rows, n = trans_b ? b_rows : b_cols;
    const std::size_t k = trans_a ? a_rows : a_cols;
    if (m == 0 || n == 0) return;
    if (k == 0) return scale_without_product(c, n, m, n, beta);
    get_num_threads();  // the first call puts OpenBLAS on one thread (core/engine/threads.cpp)
    const FixedChunks blocks = gemm_blocks(m, n, k);
    const bool by_rows = m >= n;
    parallel_for(blocks.count, kParallelMinWork, [&](std::size_t first, std::size_t last) {
        for (std::size_t i = first; i < last; ++i) {
            const std::size_t begin = blocks.begin(i), count = blocks.end(i) - begin;
            if (by_rows) {  // rows [begin, begin + count) of C = those rows of op(A) times op(B)
                const T* a_block = trans_a ? a + begin : a + begin * a_cols;
                blas_gemm(a_block, a_cols, trans_a, b, b_cols, trans_b, c + begin * n, n, count, n, k, beta);
            } else {  // columns [begin, begin + count) of C = op(A) times those columns of op(B)
                const T* b_block = trans_b ? b + begin * b_cols : b + begin;
                blas_gemm(a, a_cols, trans_a, b_block, b_cols, trans_b, c + begin, n, m, count, k, beta);
            }
        }
    });
}

template <class T>
void one_call_gemm(const T* a, std::size_t lda, bool trans_a, const T* b, std::size_t ldb, bool trans_b, T* c,
                   std::size_t ldc, std::size_t m, std::size_t n, std::size_t k, T alpha, T beta) {
    if (m == 0 || n == 0) return;
    if (k == 0) return scale_without_product(c, ldc, m, n, beta);
    get_num_threads();  // the first call puts OpenBLAS on one thread (core/engine/threads.cpp)
    blas_gemm(a, lda, trans_a, b, ldb, trans_b, c, ldc, m, n, k, beta, alpha);
}

// The rows x cols matrix at p (rows ld apart) widened into a packed float buffer (exact).
std::vector<float> widened(const bfloat16* p, std::size_t rows, std::size_t cols, std::size_t ld) {
    std::vector<float> out(rows * cols);
    for (std::size_t i = 0; i < rows; ++i) {
        for (std::size_t j = 0; j < cols; ++j) out[i * cols + j] = static_cast<float>(p[i * ld + j]);
    }
    return out;
}

// The float product c32 (m x n, packed) rounded once into C (rows ldc apart).
void round_into(const std::vector<float>& c32, bfloat16* c, std::size_t ldc, std::size_t m, std::size_t n) {
    for (std::size_t i = 0; i < m; ++i) {
        for (std::size_t j = 0; j < n; ++j) c[i * ldc + j] = bfloat16(c32[i * n + j]);
    }
}

}  // namespace

void gemm(const bfloat16* a, std::size_t a_rows, std::size_t a_cols, bool trans_a, const bfloat16* b, std::size_t b_rows,
          std::size_t b_cols, bool trans_b, bfloat16* c, bfloat16 beta) {
    const std::size_t m = trans_a ? a_cols : a_rows, n = trans_b ? b_rows : b_cols;
    const float beta32 = static_cast<float>(beta);
    std::vector<float> c32 = beta32 == 0.0f ? std::vector<float>(m * n) : widened(c, m, n, n);
    gemm(widened(a, a_rows, a_cols, a_cols).data(), a_rows, a_cols, trans_a, widened(b, b_rows, b_cols, b_cols).data(), b_rows,
         b_cols, trans_b, c32.data(), beta32);
    round_into(c32, c, n, m, n);
}

void gemm_one_call(const bfloat16* a, std::size_t lda, bool trans_a, const bfloat16* b, std::size_t ldb, bool trans_b,
                   bfloat16* c, std::size_t ldc, std::size_t m, std::size_t n, std::size_t k, bfloat16 alpha, bfloat16 beta) {
    const std::size_t a_rows = trans_a ? k : m, a_cols = trans_a ? m : k;
    const std::size_t b_rows = trans_b ? n : k, b_cols = trans_b ? k : n;
    const float beta32 = static_cast<float>(beta);
    std::vector<float> c32 = beta32 == 0.0f ? std::vector<float>(m * n) : widened(c, m, n, ldc);
    one_call_gemm(widened(a, a_rows, a_cols, lda).data(), a_cols, trans_a, widened(b, b_rows, b_cols, ldb).data(), b_cols,
                  trans_b, c32.data(), n, m, n, k, static_cast<float>(alpha), beta32);
    round_into(c32, c, ldc, m, n);
}

void gemm_one_call(const double* a, std::size_t lda, bool trans_a, const double* b, std::size_t ldb, bool trans_b,
                   double* c, std::size_t ldc, std::size_t m, std::size_t n, std::size_t k, double alpha, double beta) {
    one_call_gemm(a, lda, trans_a, b, ldb, trans_b, c, ldc, m, n, k, alpha, beta);
}

void gemm_one_call(const float* a, std::size_t lda, bool trans_a, const float* b, std::size_t ldb, bool trans_b, float* c,
                   std::size_t ldc, std::size_t m, std::size_t n, std::size_t k, float alpha, float beta) {
    one_call_gemm(a, lda, trans_a, b, ldb, trans_b, c, ldc, m, n, k, alpha, beta);
}

void gemm(const double* a, std::size_t a_rows, std::size_t a_cols, bool trans_a, const double* b, std::size_t b_rows,
          std::size_t b_cols, bool trans_b, double* c, double beta) {
    gemm_blocked(a, a_rows, a_cols, trans_a, b, b_rows, b_cols, trans_b, c, beta);
}

void gemm(const float* a, std::size_t a_rows, std::size_t a_cols, bool trans_a, const float* b, std::size_t b_rows,
          std::size_t b_cols, bool trans_b, float* c, float beta) {
    gemm_blocked(a, a_rows, a_cols, trans_a, b, b_rows, b_cols, trans_b, c, beta);
}

}  // namespace xg::detail
