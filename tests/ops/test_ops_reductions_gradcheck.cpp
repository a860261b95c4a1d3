// Finite-difference checks of matmul (2-D and batched with broadcast batch axes), of indexed_gemm (the
// op under it, with transpose flags), and of the reductions sum/mean/var/max over several axes, with
// and without keepdim, negative axes too.
#include <algorithm>
#include <cstdio>
#include <numeric>

#include <catch2/catch.hpp>

#include "core/ops/ops.hpp"
#include "core/engine/random.hpp"
#include "tests/support/gradcheck_cases.hpp"
#include "tests/support/indexed_gemm_cases.hpp"

namespace xg_test_ops_reductions_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg::test::gradcheck_cases;

namespace {

// Distinct values 0.1 apart in a seeded random order: max has no ties, and no +-1e-6 probe can
// change which element is the maximum.
Tensor untied_leaf(const xg::Shape& shape, std::uint64_t seed) {
    xg::Generator gen(seed);
    xg::Array a = xg::Array::from_shape(shape);
    std::vector<double> values(a.size());
    std::iota(values.begin(), values.end(), 0.0);
    for (std::size_t i = values.size(); i-- > 1;) std::swap(values[i], values[gen.randint(i + 1)]);
    for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = 0.1 * values[i] - 0.05 * static_cast<double>(a.size());
    return Tensor(std::move(a), true);
}

}  // namespace

// ---- matmul -------------------------------------------------------------------------------

TEST_CASE("gradcheck: matmul 2-D", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return xg::matmul(x[0], x[1]); }, {randn_leaf({3, 4}, 1), randn_leaf({4, 2}, 2)},
                   "matmul (3,4)@(4,2)");
}

TEST_CASE("gradcheck: matmul batched", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return xg::matmul(x[0], x[1]); }, {randn_leaf({2, 2, 3}, 3), randn_leaf({2, 3, 2}, 4)},
                   "matmul (2,2,3)@(2,3,2)");
}

TEST_CASE("gradcheck: matmul broadcast batch", "[gradcheck]") {
    // Batch (2,1) against (3,) broadcasts to (2,3): each matrix of a meets three of b.
    check_gradient([](const Inputs& x) { return xg::matmul(x[0], x[1]); }, {randn_leaf({2, 1, 2, 3}, 5), randn_leaf({3, 3, 2}, 6)},
                   "matmul (2,1,2,3)@(3,3,2)");
    // A plain matrix against a batch: the (3,2) weight gathers gradient from every batch.
    check_gradient([](const Inputs& x) { return xg::matmul(x[0], x[1]); }, {randn_leaf({2, 2, 3}, 7), randn_leaf({3, 2}, 8)},
                   "matmul (2,2,3)@(3,2)");
}

TEST_CASE("gradcheck: matmul broadcast left operand", "[gradcheck]") {
    // A plain matrix on the left of a batch: its gradient sums the batch's products (beta = 1).
    check_gradient([](const Inputs& x) { return xg::matmul(x[0], x[1]); }, {randn_leaf({3, 4}, 9), randn_leaf({2, 4, 2}, 10)},
                   "matmul (3,4)@(2,4,2)");
}

TEST_CASE("gradcheck: indexed_gemm, every transpose, summed and unwritten output matrices", "[gradcheck]") {
    // The op under matmul (core/ops/indexed_gemm.hpp) with transpose flags, which matmul's own
    // backward uses: both operands' gradients for each of the four cases.
    using namespace xg::test::indexed_gemm_cases;
    for (const bool ta : {false, true}) {
        for (const bool tb : {false, true}) {
            check_gradient([ta, tb](const Inputs& x) { return products(x[0], ta, x[1], tb); },
                           {randn_leaf(a_shape(ta), 14), randn_leaf(b_shape(tb), 15)},
                           std::string("indexed_gemm ta ") + (ta ? "T" : "F") + ", tb " + (tb ? "T" : "F"));
        }
    }
}

// ---- sum / mean ---------------------------------------------------------------------------

TEST_CASE("gradcheck: sum", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return xg::sum(x[0]); }, {randn_leaf({2, 3, 2}, 10)}, "sum all");
    check_gradient([](const Inputs& x) { return xg::sum(x[0], {1}); }, {randn_leaf({2, 3, 2}, 11)}, "sum axis 1");
    check_gradient([](const Inputs& x) { return xg::sum(x[0], {0, 2}, true); }, {randn_leaf({2, 3, 2}, 12)}, "sum axes (0,2) keepdim");
    check_gradient([](const Inputs& x) { return xg::sum(x[0], {-1}); }, {randn_leaf({2, 3, 2}, 13)}, "sum axis -1");
    check_gradient([](const Inputs& x) { return xg::sum(x[0], {-3, -2}, true); }, {randn_leaf({2, 3, 2}, 14)},
                   "sum axes (-3,-2) keepdim");
}

TEST_CASE("gradcheck: mean", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return xg::mean(x[0]); }, {randn_leaf({2, 3, 2}, 15)}, "mean all");
    check_gradient([](const Inputs& x) { return xg::mean(x[0], {0}); }, {randn_leaf({2, 3, 2}, 16)}, "mean axis 0");
    check_gradient([](const Inputs& x) { return xg::mean(x[0], {1, 2}, true); }, {randn_leaf({2, 3, 2}, 17)},
                   "mean axes (1,2) keepdim");
    check_gradient([](const Inputs& x) { return xg::mean(x[0], {-2}); }, {randn_leaf({2, 3, 2}, 18)}, "mean axis -2");
}

// ---- var ----------------------------------------------------------------------------------

TEST_CASE("gradcheck: var unbiased", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return xg::var(x[0], {-1}); }, {randn_leaf({2, 3, 4}, 20)}, "var axis -1 unbiased");
    check_gradient([](const Inputs& x) { return xg::var(x[0], {0, 2}, true, true); }, {randn_leaf({2, 3, 4}, 21)},
                   "var axes (0,2) unbiased keepdim");
    check_gradient([](const Inputs& x) { return xg::var(x[0], {}, true); }, {randn_leaf({2, 3}, 22)}, "var all unbiased");
}

TEST_CASE("gradcheck: var biased", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return xg::var(x[0], {1}, false); }, {randn_leaf({2, 3, 4}, 23)}, "var axis 1 biased");
    check_gradient([](const Inputs& x) { return xg::var(x[0], {-3, -1}, false, true); }, {randn_leaf({2, 3, 4}, 24)},
                   "var axes (-3,-1) biased keepdim");
}

TEST_CASE("gradcheck: var with a large mean", "[gradcheck]") {
    // The two-pass formula keeps the gradient right when the mean dwarfs the spread.
    Tensor x = randn_leaf({2, 4}, 25);
    for (double& v : x.mutable_value()) v += 1e4;
    check_gradient([](const Inputs& in) { return xg::var(in[0], {1}); }, {x}, "var mean 1e4");
}

// ---- max ----------------------------------------------------------------------------------

TEST_CASE("gradcheck: max", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return xg::max(x[0]); }, {untied_leaf({2, 3, 4}, 30)}, "max all");
    check_gradient([](const Inputs& x) { return xg::max(x[0], {1}); }, {untied_leaf({2, 3, 4}, 31)}, "max axis 1");
    check_gradient([](const Inputs& x) { return xg::max(x[0], {0, 2}, true); }, {untied_leaf({2, 3, 4}, 32)},
                   "max axes (0,2) keepdim");
    check_gradient([](const Inputs& x) { return xg::max(x[0], {-1}, true); }, {untied_leaf({2, 3, 4}, 33)}, "max axis -1 keepdim");
    check_gradient([](const Inputs& x) { return xg::max(x[0], {-2}); }, {untied_leaf({2, 3, 4}, 34)}, "max axis -2");
}

TEST_CASE("gradcheck: reductions composed", "[gradcheck]") {
    // x - mean(x, keepdim) broadcasts the reduction back over the input, as normalisation layers do.
    check_gradient([](const Inputs& x) { return (x[0] - xg::mean(x[0], {-1}, true)) / xg::sqrt(xg::var(x[0], {-1}, false, true) + 1e-5); },
                   {randn_leaf({3, 4}, 40)}, "normalise rows");
}

}  // namespace xg_test_ops_reductions_gradcheck
