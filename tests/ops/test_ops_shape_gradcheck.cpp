// Finite-difference checks of the shape ops (reshape ... masked_fill) and of softmax and
// log_softmax, including logits of +-1000 where a naive exp would overflow.
#include <cmath>
#include <cstdio>

#include <catch2/catch.hpp>

#include "core/ops/ops.hpp"
#include "core/engine/random.hpp"
#include "tests/support/gradcheck_cases.hpp"

namespace xg_test_ops_shape_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg::test::gradcheck_cases;

namespace {

// A fixed non-uniform weighting, so a permuted gradient cannot pass by symmetry.
Tensor weighted(const Tensor& t) {
    xg::Array w = xg::Array::from_shape(t.shape());
    for (std::size_t i = 0; i < w.size(); ++i) w.data()[i] = 1.0 + 0.25 * static_cast<double>(i);
    return t * Tensor(std::move(w));
}

}  // namespace

TEST_CASE("gradcheck: reshape", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return weighted(xg::reshape(x[0], {3, -1})); }, {randn_leaf({2, 3, 2}, 1)}, "reshape (3,-1)");
    check_gradient([](const Inputs& x) { return weighted(xg::reshape(x[0], {12})); }, {randn_leaf({2, 3, 2}, 2)}, "reshape (12,)");
}

TEST_CASE("gradcheck: transpose", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return weighted(xg::transpose(x[0], 0, 2)); }, {randn_leaf({2, 3, 2}, 3)}, "transpose 0,2");
    check_gradient([](const Inputs& x) { return weighted(xg::transpose(x[0], -1, -2)); }, {randn_leaf({2, 3, 4}, 4)},
                   "transpose -1,-2");
}

TEST_CASE("gradcheck: permute", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return weighted(xg::permute(x[0], {2, 0, 1})); }, {randn_leaf({2, 3, 4}, 5)},
                   "permute (2,0,1)");
    check_gradient([](const Inputs& x) { return weighted(xg::permute(x[0], {-1, 0, -2})); }, {randn_leaf({2, 3, 4}, 6)},
                   "permute (-1,0,-2)");
}

TEST_CASE("gradcheck: unsqueeze", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return weighted(xg::unsqueeze(x[0], 1)); }, {randn_leaf({2, 3}, 7)}, "unsqueeze 1");
    check_gradient([](const Inputs& x) { return weighted(xg::unsqueeze(x[0], -1)); }, {randn_leaf({2, 3}, 8)}, "unsqueeze -1");
}

TEST_CASE("gradcheck: squeeze", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return weighted(xg::squeeze(x[0], 1)); }, {randn_leaf({2, 1, 3}, 9)}, "squeeze 1");
    check_gradient([](const Inputs& x) { return weighted(xg::squeeze(x[0], -1)); }, {randn_leaf({3, 1}, 10)}, "squeeze -1");
}

TEST_CASE("gradcheck: narrow", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return weighted(xg::narrow(x[0], 1, 1, 2)); }, {randn_leaf({2, 4, 2}, 11)}, "narrow axis 1");
    check_gradient([](const Inputs& x) { return weighted(xg::narrow(x[0], -1, 0, 3)); }, {randn_leaf({2, 4}, 12)}, "narrow axis -1");
}

TEST_CASE("gradcheck: slice with step", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return weighted(xg::slice(x[0], 1, 1, 6, 2)); }, {randn_leaf({2, 6}, 13)}, "slice [1:6:2]");
    check_gradient([](const Inputs& x) { return weighted(xg::slice(x[0], 0, 0, 5, 3)); }, {randn_leaf({5, 2}, 14)}, "slice [0:5:3] axis 0");
    check_gradient([](const Inputs& x) { return weighted(xg::slice(x[0], -2, 2, 4)); }, {randn_leaf({2, 4, 2}, 15)}, "slice [2:4] axis -2");
}

TEST_CASE("gradcheck: cat", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return weighted(xg::cat({x[0], x[1], x[2]}, 0)); },
                   {randn_leaf({1, 3}, 16), randn_leaf({2, 3}, 17), randn_leaf({1, 3}, 18)}, "cat axis 0");
    Tensor constant = randn_leaf({2, 2}, 19);
    constant.requires_grad_(false);
    check_gradient([](const Inputs& x) { return weighted(xg::cat({x[0], x[1]}, -1)); }, {randn_leaf({2, 3}, 20), constant},
                   "cat axis -1 with a constant");
}

TEST_CASE("gradcheck: stack", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return weighted(xg::stack({x[0], x[1]}, 1)); }, {randn_leaf({2, 3}, 21), randn_leaf({2, 3}, 22)},
                   "stack axis 1");
    check_gradient([](const Inputs& x) { return weighted(xg::stack({x[0], x[1], x[0]}, -1)); },
                   {randn_leaf({3}, 23), randn_leaf({3}, 24)}, "stack axis -1 with a repeat");
}

TEST_CASE("gradcheck: gather", "[gradcheck]") {
    const xg::IndexArray along1 = {{0, 2, 2, 4}, {1, 1, 1, 3}, {4, 0, 3, 0}};
    check_gradient([along1](const Inputs& x) { return weighted(xg::gather(x[0], 1, along1)); }, {randn_leaf({3, 5}, 25)},
                   "gather axis 1 repeated indices");
    const xg::IndexArray along0 = {{2, 0}, {2, 2}};
    check_gradient([along0](const Inputs& x) { return weighted(xg::gather(x[0], -2, along0)); }, {randn_leaf({3, 4}, 26)},
                   "gather axis -2 smaller index");
}

TEST_CASE("gradcheck: masked_fill", "[gradcheck]") {
    const xg::Mask full = {{true, false, false}, {false, true, true}};
    check_gradient([full](const Inputs& x) { return weighted(xg::masked_fill(x[0], full, -5.0)); }, {randn_leaf({2, 3}, 27)},
                   "masked_fill full mask");
    const xg::Mask row = {false, true, false};  // broadcast over the leading axis
    check_gradient([row](const Inputs& x) { return weighted(xg::masked_fill(x[0], row, 0.0)); }, {randn_leaf({2, 3}, 28)},
                   "masked_fill broadcast mask");
}

// ---- softmax ------------------------------------------------------------------------------

TEST_CASE("gradcheck: softmax", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return xg::softmax(x[0]); }, {randn_leaf({2, 4}, 30)}, "softmax axis -1");
    check_gradient([](const Inputs& x) { return xg::softmax(x[0], 0); }, {randn_leaf({3, 2}, 31)}, "softmax axis 0");
    check_gradient([](const Inputs& x) { return xg::softmax(x[0], 1); }, {randn_leaf({2, 3, 2}, 32)}, "softmax axis 1 of 3-D");
}

TEST_CASE("gradcheck: log_softmax", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return xg::log_softmax(x[0]); }, {randn_leaf({2, 4}, 33)}, "log_softmax axis -1");
    check_gradient([](const Inputs& x) { return xg::log_softmax(x[0], 0); }, {randn_leaf({3, 2}, 34)}, "log_softmax axis 0");
    check_gradient([](const Inputs& x) { return xg::log_softmax(x[0], -2); }, {randn_leaf({2, 3, 2}, 35)},
                   "log_softmax axis -2 of 3-D");
}

TEST_CASE("gradcheck: softmax and log_softmax with logits of +-1000", "[gradcheck]") {
    const Tensor logits(xg::Array{{1000.0, -1000.0, 0.0, 999.0, 1000.0},
                                  {-1000.0, -1000.0, -999.0, -1000.0, -998.0},
                                  {1000.0, 1.0, -1000.0, 2.0, 0.5}},
                        true);
    const Tensor y = xg::softmax(logits), ly = xg::log_softmax(logits);
    for (double v : y.value()) CHECK(std::isfinite(v));
    for (double v : ly.value()) CHECK(std::isfinite(v));
    // Row 0: two logits tie at 1000 and one sits at 999, so softmax is e/(2e+1), 1/(2e+1).
    CHECK(y(0, 0) == Approx(std::exp(1.0) / (2 * std::exp(1.0) + 1)).epsilon(1e-14));
    CHECK(y(0, 3) == Approx(1.0 / (2 * std::exp(1.0) + 1)).epsilon(1e-14));
    CHECK(ly(0, 1) == Approx(-2000.0 - std::log(2 + std::exp(-1.0))).epsilon(1e-14));
    check_gradient([](const Inputs& x) { return xg::softmax(x[0]); }, {logits}, "softmax +-1000");
    check_gradient([](const Inputs& x) { return xg::log_softmax(x[0]); }, {logits}, "log_softmax +-1000");
}

}  // namespace xg_test_ops_shape_gradcheck
