// The products the indexed_gemm tests run (core/ops/indexed_gemm.hpp): two matrices of A, three of
// B, four products into four output matrices, where output 0 takes two products (the second
// added with beta = 1), A's matrices and B's matrix 1 are each read twice, and output 3 takes
// none (it must be 0). op(A) is (2, 3) and op(B) is (3, 4) for every choice of transposes.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "core/ops/indexed_gemm.hpp"
#include "core/ops/ops.hpp"

namespace xg::test::indexed_gemm_cases {

inline xg::detail::MatrixIndices indices(std::vector<std::size_t> v) {
    return std::make_shared<const std::vector<std::size_t>>(std::move(v));
}

/// The stored shapes of A and B for transposes (ta, tb).
inline Shape a_shape(bool ta) { return ta ? Shape{2, 3, 2} : Shape{2, 2, 3}; }
inline Shape b_shape(bool tb) { return tb ? Shape{3, 4, 3} : Shape{3, 3, 4}; }

/// C[c_i] (+)= op(A[a_i]) op(B[b_i]) over the products above.
inline Tensor products(const Tensor& a, bool ta, const Tensor& b, bool tb) {
    return xg::detail::indexed_gemm({a, ta, indices({0, 1, 0, 1})}, {b, tb, indices({2, 0, 1, 1})}, indices({0, 0, 2, 1}),
                                    {4, 2, 4}, false);
}

/// The same with ordinary ops: matrix i of a stack by narrow and reshape, op by transpose.
inline Tensor products_by_matmul(const Tensor& a, bool ta, const Tensor& b, bool tb) {
    const auto matrix = [](const Tensor& stack, long i, bool t) {
        const Shape s = stack.shape();
        const Tensor m = reshape(narrow(stack, 0, i, 1), {static_cast<long>(s[1]), static_cast<long>(s[2])});
        return t ? transpose(m, 0, 1) : m;
    };
    const auto product = [&](long i, long j) { return matmul(matrix(a, i, ta), matrix(b, j, tb)); };
    return stack({product(0, 2) + product(1, 0), product(1, 1), product(0, 1), zeros({2, 4}, a.dtype())}, 0);
}

}  // namespace xg::test::indexed_gemm_cases
