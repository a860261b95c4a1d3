// indexed_gemm (core/ops/indexed_gemm.hpp), the one op of every matrix product: its values for
// every choice of transposes against ordinary ops, the output matrix no product writes, the order
// of a sum of products in float32 (bit for bit, one sgemm after the other with beta = 1), and the
// names its nodes carry. Its gradients: test_ops_reductions_gradcheck.cpp and test_ops_gradgrad.cpp.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/ops/gemm.hpp"
#include "tests/support/gradcheck_support.hpp"
#include "tests/support/indexed_gemm_cases.hpp"

namespace xg_test_ops_indexed_gemm {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using xg::Tensor;
using xg::test::randn_leaf;
using namespace xg::test::indexed_gemm_cases;

TEST_CASE("indexed_gemm: every transpose, products summed into their output matrix, an unwritten matrix is 0", "[unit]") {
    for (const bool ta : {false, true}) {
        for (const bool tb : {false, true}) {
            INFO("ta " << ta << ", tb " << tb);
            const Tensor a = randn_leaf(a_shape(ta), 1), b = randn_leaf(b_shape(tb), 2);
            const Tensor out = products(a, ta, b, tb);
            CHECK(out.shape() == xg::Shape{4, 2, 4});
            CHECK(out.op() == "matmul");
            CHECK(xt::allclose(out.value(), products_by_matmul(a, ta, b, tb).value(), 1e-14, 1e-14));
            CHECK(xt::all(xt::equal(xt::view(out.value(), 3), 0.0)));  // the output matrix no product writes
        }
    }
}

TEST_CASE("indexed_gemm in float32: each output matrix is its products' sgemm calls in order (beta = 0, then 1)", "[unit]") {
    const Tensor a(randn_leaf({2, 2, 3}, 3).value(), xg::kFloat32, true), b(randn_leaf({3, 3, 4}, 4).value(), xg::kFloat32, true);
    const Tensor out = products(a, false, b, false);
    CHECK(out.dtype() == xg::kFloat32);
    CHECK(out.node()->value_mirror == xg::Node::Mirror::None);
    const float *pa = a.values<float>().data(), *pb = b.values<float>().data();
    xg::FloatArray expected = xt::zeros<float>({4, 2, 4});
    const auto sgemm = [&](std::size_t i, std::size_t j, std::size_t c, float beta) {
        xg::detail::gemm(pa + i * 6, 2, 3, false, pb + j * 12, 3, 4, false, expected.data() + c * 8, beta);
    };
    sgemm(0, 2, 0, 0.0f);
    sgemm(1, 0, 0, 1.0f);
    sgemm(0, 1, 2, 0.0f);
    sgemm(1, 1, 1, 0.0f);
    CHECK(xt::all(xt::equal(out.values<float>(), expected)));
}

TEST_CASE("indexed_gemm: the products of a backward are matmul_backward nodes, differentiable again", "[unit]") {
    const Tensor a = randn_leaf({2, 2, 3}, 5), b = randn_leaf({3, 2}, 6);  // b broadcast over the batch
    const Tensor y = xg::matmul(a, b);
    CHECK(y.op() == "matmul");
    const std::vector<Tensor> g = xg::grad({xg::sum(y * y)}, {a, b}, {}, {false, true, false});
    // d sum(y^2) / db = sum over the batch of a_i^T (2 y_i): one node, its two products summed by GEMM
    const Tensor db = g[1];
    CHECK(db.shape() == xg::Shape{3, 2});
    CHECK(db.op() == "matmul_backward");
    CHECK(g[0].op() == "matmul_backward");
    const auto batch = [](const Tensor& t, long i) { return xg::squeeze(xg::narrow(t, 0, i, 1), 0); };
    const Tensor expected = xg::matmul(xg::transpose(batch(a, 0), 0, 1), 2.0 * batch(y, 0)) +
                            xg::matmul(xg::transpose(batch(a, 1), 0, 1), 2.0 * batch(y, 1));
    CHECK(xt::allclose(db.value(), expected.value(), 1e-14, 1e-14));
    // and again: d sum(db) / da has a graph of its own
    REQUIRE(db.requires_grad());
    const std::vector<Tensor> gg = xg::grad({xg::sum(db)}, {a}, {}, {false, true, false});
    CHECK(gg[0].shape() == a.shape());
    CHECK(gg[0].requires_grad());
}

}  // namespace xg_test_ops_indexed_gemm
