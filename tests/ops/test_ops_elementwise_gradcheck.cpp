// Finite-difference checks of the element-wise ops: binary ops with NumPy broadcasting, the
// scalar overloads and every unary op. Inputs are seeded and kept away from kinks and poles
// (relu/abs away from 0, log/sqrt/div on positive or well-separated values).
#include <cmath>
#include <cstdio>

#include <catch2/catch.hpp>

#include "core/ops/ops.hpp"
#include "core/engine/random.hpp"
#include "tests/support/gradcheck_cases.hpp"

namespace xg_test_ops_elementwise_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg::test::gradcheck_cases;

namespace {

// Signed values with |v| >= 0.3, so a +-1e-6 probe never crosses a kink at 0.
Tensor signed_leaf(const xg::Shape& shape, std::uint64_t seed) {
    Tensor t = randn_leaf(shape, seed);
    for (double& v : t.mutable_value()) v += v >= 0 ? 0.3 : -0.3;
    return t;
}

// Values in [0.5, 2): safe for log, sqrt, fractional powers and as divisors.
Tensor positive_leaf(const xg::Shape& shape, std::uint64_t seed) {
    xg::Generator gen(seed);
    xg::Array a = xg::Array::from_shape(shape);
    for (double& v : a) v = gen.uniform(0.5, 2.0);
    return Tensor(std::move(a), true);
}

}  // namespace

// ---- binary ops ---------------------------------------------------------------------------

TEST_CASE("gradcheck: add same shape", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return x[0] + x[1]; }, {randn_leaf({2, 3}, 1), randn_leaf({2, 3}, 2)}, "add same shape");
}

TEST_CASE("gradcheck: add broadcast", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return xg::add(x[0], x[1]); }, {randn_leaf({2, 3, 1}, 3), randn_leaf({4}, 4)},
                   "add (2,3,1)+(4,)");
}

TEST_CASE("gradcheck: sub broadcast", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return xg::sub(x[0], x[1]); }, {randn_leaf({3, 1}, 5), randn_leaf({1, 4}, 6)},
                   "sub (3,1)-(1,4)");
}

TEST_CASE("gradcheck: mul broadcast", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return xg::mul(x[0], x[1]); }, {randn_leaf({2, 3, 1}, 7), randn_leaf({1, 4}, 8)},
                   "mul (2,3,1)*(1,4)");
}

TEST_CASE("gradcheck: mul same tensor twice", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return x[0] * x[0]; }, {randn_leaf({3, 2}, 9)}, "mul x*x");
}

TEST_CASE("gradcheck: div broadcast", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return xg::div(x[0], x[1]); }, {randn_leaf({2, 3}, 10), positive_leaf({3}, 11)},
                   "div (2,3)/(3,)");
    check_gradient([](const Inputs& x) { return xg::div(x[0], x[1]); }, {randn_leaf({3}, 12), signed_leaf({2, 1}, 13)},
                   "div (3,)/(2,1) signed divisor");
}

TEST_CASE("gradcheck: broadcast mul-add (2,3,1)*(1,4)+(4,)", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return x[0] * x[1] + x[2]; },
                   {randn_leaf({2, 3, 1}, 14), randn_leaf({1, 4}, 15), randn_leaf({4}, 16)}, "mul-add (2,3,1)*(1,4)+(4,)");
}

TEST_CASE("gradcheck: mul/div with a 0-D operand", "[gradcheck]") {
    Tensor s = xg::scalar(0.7, true);
    check_gradient([](const Inputs& x) { return x[0] * x[1] - x[1] / x[0]; }, {s, randn_leaf({2, 3}, 17)}, "0-D (x) and (2,3)");
}

TEST_CASE("gradcheck: mul/div with a constant operand", "[gradcheck]") {
    Tensor constant = randn_leaf({3}, 18);
    constant.requires_grad_(false);
    check_gradient([](const Inputs& x) { return x[0] / x[1] * x[1]; }, {randn_leaf({2, 3}, 19), constant}, "div/mul with a constant");
}

// ---- scalar overloads ---------------------------------------------------------------------

TEST_CASE("gradcheck: scalar overloads tensor-op-double", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return x[0] + 2.5; }, {randn_leaf({2, 3}, 20)}, "x + 2.5");
    check_gradient([](const Inputs& x) { return x[0] - 1.5; }, {randn_leaf({2, 3}, 21)}, "x - 1.5");
    check_gradient([](const Inputs& x) { return x[0] * -3.0; }, {randn_leaf({2, 3}, 22)}, "x * -3");
    check_gradient([](const Inputs& x) { return x[0] / 4.0; }, {randn_leaf({2, 3}, 23)}, "x / 4");
}

TEST_CASE("gradcheck: scalar overloads double-op-tensor", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return 2.5 + x[0]; }, {randn_leaf({2, 3}, 24)}, "2.5 + x");
    check_gradient([](const Inputs& x) { return 1.5 - x[0]; }, {randn_leaf({2, 3}, 25)}, "1.5 - x");
    check_gradient([](const Inputs& x) { return -3.0 * x[0]; }, {randn_leaf({2, 3}, 26)}, "-3 * x");
    check_gradient([](const Inputs& x) { return 2.0 / x[0]; }, {signed_leaf({2, 3}, 27)}, "2 / x");
}

// ---- unary ops ----------------------------------------------------------------------------

TEST_CASE("gradcheck: neg", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return xg::neg(x[0]); }, {randn_leaf({2, 3}, 30)}, "neg");
    check_gradient([](const Inputs& x) { return -x[0]; }, {randn_leaf({2, 3}, 31)}, "unary operator-");
}

TEST_CASE("gradcheck: pow", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return xg::pow(x[0], 3.0); }, {randn_leaf({2, 3}, 32)}, "pow 3 (signed x)");
    check_gradient([](const Inputs& x) { return xg::pow(x[0], 2.5); }, {positive_leaf({2, 3}, 33)}, "pow 2.5");
    check_gradient([](const Inputs& x) { return xg::pow(x[0], -1.5); }, {positive_leaf({2, 3}, 34)}, "pow -1.5");
    check_gradient([](const Inputs& x) { return xg::pow(x[0], 0.5); }, {positive_leaf({2, 3}, 35)}, "pow 0.5");
}

TEST_CASE("gradcheck: exp", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return xg::exp(x[0]); }, {randn_leaf({2, 3}, 36)}, "exp");
}

TEST_CASE("gradcheck: log", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return xg::log(x[0]); }, {positive_leaf({2, 3}, 37)}, "log");
}

TEST_CASE("gradcheck: sqrt", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return xg::sqrt(x[0]); }, {positive_leaf({2, 3}, 38)}, "sqrt");
}

TEST_CASE("gradcheck: tanh", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return xg::tanh(x[0]); }, {randn_leaf({2, 3}, 39)}, "tanh");
}

TEST_CASE("gradcheck: erf", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return xg::erf(x[0]); }, {randn_leaf({2, 3}, 40)}, "erf");
}

TEST_CASE("gradcheck: relu", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return xg::relu(x[0]); }, {signed_leaf({2, 3}, 41)}, "relu");
}

TEST_CASE("gradcheck: sigmoid", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return xg::sigmoid(x[0]); }, {randn_leaf({2, 3}, 42)}, "sigmoid");
    // Both branches of the overflow-safe formula, far into the tails.
    Tensor tails(xg::Array{-30.0, -8.0, -0.5, 0.5, 8.0, 30.0}, true);
    check_gradient([](const Inputs& x) { return xg::sigmoid(x[0]); }, {tails}, "sigmoid tails");
}

TEST_CASE("gradcheck: abs", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return xg::abs(x[0]); }, {signed_leaf({2, 3}, 43)}, "abs");
}

TEST_CASE("gradcheck: composed element-wise chain", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return xg::tanh(x[0] * x[1] + x[2]) * xg::sigmoid(x[0]); },
                   {randn_leaf({2, 3}, 44), randn_leaf({3}, 45), randn_leaf({2, 1}, 46)}, "tanh(a*b+c)*sigmoid(a)");
}

TEST_CASE("gradcheck: sum_to", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return xg::sum_to(x[0], {1, 3}); }, {randn_leaf({2, 4, 3}, 61)}, "sum_to (2,4,3)->(1,3)");
}

TEST_CASE("gradcheck: expand", "[gradcheck]") {
    check_gradient([](const Inputs& x) { return xg::expand(x[0], {2, 4, 3}); }, {randn_leaf({4, 1}, 62)}, "expand (4,1)->(2,4,3)");
}

}  // namespace xg_test_ops_elementwise_gradcheck
