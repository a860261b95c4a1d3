#include "core/gemm.hpp"

#include <array>

#include <xtensor-blas/xblas.hpp>
#include <xtensor/xadapt.hpp>

namespace xg::detail {

void gemm(const double* a, std::size_t a_rows, std::size_t a_cols, bool trans_a, const double* b, std::size_t b_rows,
          std::size_t b_cols, bool trans_b, double* c, double beta) {
    const std::size_t m = trans_a ? a_cols : a_rows, n = trans_b ? b_rows : b_cols;
    const std::size_t k = trans_a ? a_rows : a_cols;
    if (m == 0 || n == 0) return;
    if (k == 0) {
        for (std::size_t i = 0; i < m * n; ++i) c[i] = beta == 0.0 ? 0.0 : beta * c[i];  // c may be uninitialised
        return;
    }
    auto A = xt::adapt(a, a_rows * a_cols, xt::no_ownership(), std::array<std::size_t, 2>{a_rows, a_cols});
    auto B = xt::adapt(b, b_rows * b_cols, xt::no_ownership(), std::array<std::size_t, 2>{b_rows, b_cols});
    auto C = xt::adapt(c, m * n, xt::no_ownership(), std::array<std::size_t, 2>{m, n});
    xt::blas::gemm(A, B, C, trans_a, trans_b, 1.0, beta);
}

}  // namespace xg::detail
