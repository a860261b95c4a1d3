// Finite-difference checks of the core ops added for PyTorch parity (issue 13): sin, cos, clamp,
// maximum/minimum, min, where, index_select, matmul with 1-D operands. Inputs are seeded and kept
// away from kinks (clamp bounds, ties of min/max) where the derivative does not exist.
#include <cmath>
#include <limits>

#include <catch2/catch.hpp>

#include "core/ops/ops.hpp"
#include "core/tools/gradcheck.hpp"
#include "nn/nn.hpp"
#include "tests/support/gradcheck_support.hpp"

namespace xg_test_ops_parity_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using Inputs = std::vector<Tensor>;
using xg::test::randn_leaf;
constexpr auto check = xg::test::check_gradient;

namespace {

// A leaf with values moved at least `gap` away from each of `kinks` (probes of 1e-6 never cross).
Tensor leaf_avoiding(const Shape& shape, std::uint64_t seed, std::initializer_list<double> kinks, double gap = 0.1) {
    Tensor t = randn_leaf(shape, seed, 1.5);
    for (double& v : t.mutable_value()) {
        for (double k : kinks) {
            if (std::fabs(v - k) < gap) v = k + (v >= k ? gap : -gap);
        }
    }
    return t;
}

// sum(y * fixed random weights), so every output element reaches the scalar with its own weight.
Tensor weighted(const Tensor& y) {
    Generator gen(99);
    return sum(y * Tensor(randn(y.shape(), gen).value()));
}

}  // namespace

TEST_CASE("gradcheck: sin", "[gradcheck]") {
    check([](const Inputs& x) { return xg::sin(x[0]); }, {randn_leaf({3, 4}, 301, 2.0)}, "sin");
}

TEST_CASE("gradcheck: cos", "[gradcheck]") {
    check([](const Inputs& x) { return xg::cos(x[0]); }, {randn_leaf({3, 4}, 302, 2.0)}, "cos");
}

TEST_CASE("gradcheck: clamp", "[gradcheck]") {
    const Tensor x = leaf_avoiding({4, 5}, 303, {-0.5, 0.8});
    check([](const Inputs& in) { return clamp(in[0], -0.5, 0.8); }, {x}, "clamp [-0.5, 0.8]");
    check([](const Inputs& in) { return clamp(in[0], -0.5, std::nullopt); }, {x}, "clamp min only");
    check([](const Inputs& in) { return clamp(in[0], std::nullopt, 0.8); }, {x}, "clamp max only");
}

TEST_CASE("gradcheck: maximum broadcast", "[gradcheck]") {
    // b's values are 0.25 apart from every a value they meet: no ties, no kinks within a probe.
    Tensor a = randn_leaf({2, 3, 4}, 304), b = randn_leaf({3, 1}, 305);
    for (std::size_t i = 0; i < a.numel(); ++i) {
        double& v = a.mutable_value().data()[i];
        const double other = b.value().data()[(i / 4) % 3];
        if (std::fabs(v - other) < 0.25) v = other + (v >= other ? 0.25 : -0.25);
    }
    check([](const Inputs& x) { return weighted(maximum(x[0], x[1])); }, {a, b}, "maximum (2,3,4) vs (3,1)");
    check([](const Inputs& x) { return weighted(minimum(x[0], x[1])); }, {a, b}, "minimum (2,3,4) vs (3,1)");
}

TEST_CASE("gradcheck: minimum broadcast", "[gradcheck]") {
    Tensor a = randn_leaf({4}, 306), b = randn_leaf({3, 1}, 307, 1.0, 3.0);  // b far above a: a always wins
    check([](const Inputs& x) { return weighted(minimum(x[1], x[0])); }, {a, b}, "minimum (3,1) vs (4,)");
}

TEST_CASE("gradcheck: min", "[gradcheck]") {
    const Tensor x = randn_leaf({3, 5}, 308);  // continuous random values: no ties
    check([](const Inputs& in) { return xg::min(in[0]); }, {x}, "min all");
    check([](const Inputs& in) { return weighted(xg::min(in[0], 1)); }, {x}, "min axis 1");
    check([](const Inputs& in) { return weighted(xg::min(in[0], {0}, true)); }, {x}, "min axis 0 keepdim");
}

TEST_CASE("gradcheck: where broadcast", "[gradcheck]") {
    Mask cond = Mask::from_shape({3, 1, 4});
    for (std::size_t i = 0; i < cond.size(); ++i) cond.data()[i] = (i * 7) % 3 == 0;
    auto f = [&](const Inputs& x) { return weighted(xg::where(cond, x[0], x[1])); };
    check(f, {randn_leaf({2, 1, 1, 4}, 309), randn_leaf({4}, 310)}, "where (3,1,4) ? (2,1,1,4) : (4,)");
}

TEST_CASE("gradcheck: index_select", "[gradcheck]") {
    const IndexArray index{4, 0, 4, 2};
    check([&](const Inputs& x) { return weighted(index_select(x[0], 1, index)); }, {randn_leaf({3, 5, 2}, 311)},
          "index_select axis 1, repeats");
    check([&](const Inputs& x) { return weighted(index_select(x[0], -1, {1, 1})); }, {randn_leaf({2, 3}, 312)},
          "index_select axis -1");
}

TEST_CASE("gradcheck: matmul 1-D operands", "[gradcheck]") {
    check([](const Inputs& x) { return matmul(x[0], x[1]); }, {randn_leaf({4}, 313), randn_leaf({4}, 314)}, "matmul (4,)@(4,)");
    check([](const Inputs& x) { return weighted(matmul(x[0], x[1])); }, {randn_leaf({2, 3, 4}, 315), randn_leaf({4}, 316)},
          "matmul (2,3,4)@(4,)");
    check([](const Inputs& x) { return weighted(matmul(x[0], x[1])); }, {randn_leaf({4}, 317), randn_leaf({2, 4, 3}, 318)},
          "matmul (4,)@(2,4,3)");
}

}  // namespace xg_test_ops_parity_gradcheck
