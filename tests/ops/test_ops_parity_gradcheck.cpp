// Finite-difference checks of the core ops added for PyTorch parity (issue 13): sin, cos, clamp,
// maximum/minimum, min, where, index_select, matmul with 1-D operands. Inputs are seeded and kept
// away from kinks (clamp bounds, ties of min/max) where the derivative does not exist.
#include <cmath>
#include <optional>

#include <catch2/catch.hpp>

#include "core/ops/ops.hpp"
#include "tests/support/gradcheck_cases.hpp"

namespace xg_test_ops_parity_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using namespace xg::test::gradcheck_cases;

TEST_CASE("gradcheck: sin", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return xg::sin(x[0]); }, {randn_leaf({3, 4}, 301, 2.0)}, "sin");
}

TEST_CASE("gradcheck: cos", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return xg::cos(x[0]); }, {randn_leaf({3, 4}, 302, 2.0)}, "cos");
}

TEST_CASE("gradcheck: clamp", "[gradcheck]") {
    const Tensor x = leaf_avoiding({4, 5}, 303, {-0.5, 0.8});
    check_gradient([](const Inputs& in) { return clamp(in[0], -0.5, 0.8); }, {x}, "clamp [-0.5, 0.8]");
    check_gradient([](const Inputs& in) { return clamp(in[0], -0.5, std::nullopt); }, {x}, "clamp min only");
    check_gradient([](const Inputs& in) { return clamp(in[0], std::nullopt, 0.8); }, {x}, "clamp max only");
}

TEST_CASE("gradcheck: maximum broadcast", "[gradcheck]") {
    // b's values are 0.25 apart from every a value they meet: no ties, no kinks within a probe.
    Tensor a = randn_leaf({2, 3, 4}, 304), b = randn_leaf({3, 1}, 305);
    for (std::size_t i = 0; i < a.numel(); ++i) {
        double& v = a.mutable_value().data()[i];
        const double other = b.value().data()[(i / 4) % 3];
        if (std::fabs(v - other) < 0.25) v = other + (v >= other ? 0.25 : -0.25);
    }
    check_gradient([](const Inputs& x) { return weighted_sum(maximum(x[0], x[1])); }, {a, b}, "maximum (2,3,4) vs (3,1)");
    check_gradient([](const Inputs& x) { return weighted_sum(minimum(x[0], x[1])); }, {a, b}, "minimum (2,3,4) vs (3,1)");
}

TEST_CASE("gradcheck: minimum broadcast", "[gradcheck]") {
    Tensor a = randn_leaf({4}, 306), b = randn_leaf({3, 1}, 307, 1.0, 3.0);  // b far above a: a always wins
    check_gradient([](const Inputs& x) { return weighted_sum(minimum(x[1], x[0])); }, {a, b}, "minimum (3,1) vs (4,)");
}

TEST_CASE("gradcheck: min", "[gradcheck]") {
    const Tensor x = randn_leaf({3, 5}, 308);  // continuous random values: no ties
    check_gradient([](const Inputs& in) { return xg::min(in[0]); }, {x}, "min all");
    check_gradient([](const Inputs& in) { return weighted_sum(xg::min(in[0], 1)); }, {x}, "min axis 1");
    check_gradient([](const Inputs& in) { return weighted_sum(xg::min(in[0], {0}, true)); }, {x}, "min axis 0 keepdim");
}

TEST_CASE("gradcheck: where broadcast", "[gradcheck]") {
    Mask cond = Mask::from_shape({3, 1, 4});
    for (std::size_t i = 0; i < cond.size(); ++i) cond.data()[i] = (i * 7) % 3 == 0;
    auto f = [&](const Inputs& x) { return weighted_sum(xg::where(cond, x[0], x[1])); };
    check_gradient(f, {randn_leaf({2, 1, 1, 4}, 309), randn_leaf({4}, 310)}, "where (3,1,4) ? (2,1,1,4) : (4,)");
}

TEST_CASE("gradcheck: index_select", "[gradcheck]") {
    const IndexArray index{4, 0, 4, 2};
    check_gradient([&](const Inputs& x) { return weighted_sum(index_select(x[0], 1, index)); }, {randn_leaf({3, 5, 2}, 311)},
                   "index_select axis 1, repeats");
    check_gradient([&](const Inputs& x) { return weighted_sum(index_select(x[0], -1, {1, 1})); }, {randn_leaf({2, 3}, 312)},
                   "index_select axis -1");
}

TEST_CASE("gradcheck: matmul 1-D operands", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return matmul(x[0], x[1]); }, {randn_leaf({4}, 313), randn_leaf({4}, 314)}, "matmul (4,)@(4,)");
    check_gradient([](const Inputs& x) { return weighted_sum(matmul(x[0], x[1])); }, {randn_leaf({2, 3, 4}, 315), randn_leaf({4}, 316)},
                   "matmul (2,3,4)@(4,)");
    check_gradient([](const Inputs& x) { return weighted_sum(matmul(x[0], x[1])); }, {randn_leaf({4}, 317), randn_leaf({2, 4, 3}, 318)},
                   "matmul (4,)@(2,4,3)");
}

}  // namespace xg_test_ops_parity_gradcheck
