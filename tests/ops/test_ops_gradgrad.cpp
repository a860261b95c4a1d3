// Second derivatives of the elementary ops: gradgradcheck compares finite differences of each
// op's first-order gradient (built with create_graph) with backward through that gradient.
// `ctest -L gradgradcheck` runs exactly these.
#include <cmath>

#include <catch2/catch.hpp>

#include "tests/support/gradgrad_cases.hpp"
#include "tests/support/indexed_gemm_cases.hpp"

namespace xg_test_ops_gradgrad {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg::test::gradgrad;  // check_second_order, randn_leaf, Inputs

TEST_CASE("gradgradcheck of the broadcasting binary ops", "[gradgradcheck]") {
    // (2, 3) against (3,) and against a 0-D scalar: both broadcast paths, and sum_to's backward
    const Inputs ab = {randn_leaf({2, 3}, 1), randn_leaf({3}, 2)};
    check_second_order([](const Inputs& x) { return xg::add(x[0], x[1]); }, ab, "add (2,3)+(3,)");
    check_second_order([](const Inputs& x) { return xg::sub(x[0], x[1]); }, ab, "sub (2,3)-(3,)");
    check_second_order([](const Inputs& x) { return xg::mul(x[0], x[1]); }, ab, "mul (2,3)*(3,)");
    check_second_order([](const Inputs& x) { return x[0] * x[0]; }, {randn_leaf({4}, 3)}, "mul x*x (one input twice)");
    check_second_order([](const Inputs& x) { return xg::div(x[0], x[1]); }, {randn_leaf({2, 3}, 4), randn_leaf({3}, 5, 0.3, 2.0)},
                       "div (2,3)/(3,)");
    check_second_order([](const Inputs& x) { return x[0] * x[1]; }, {randn_leaf({2, 3}, 6), randn_leaf({}, 7)}, "mul by 0-D");
}

TEST_CASE("gradgradcheck of the unary ops", "[gradgradcheck]") {
    const Inputs x = {randn_leaf({2, 3}, 11)};
    const Inputs positive = {randn_leaf({2, 3}, 12, 0.3, 2.0)};
    check_second_order([](const Inputs& a) { return xg::neg(a[0]); }, x, "neg");
    check_second_order([](const Inputs& a) { return xg::exp(a[0]); }, x, "exp");
    check_second_order([](const Inputs& a) { return xg::log(a[0]); }, positive, "log");
    check_second_order([](const Inputs& a) { return xg::sqrt(a[0]); }, positive, "sqrt");
    check_second_order([](const Inputs& a) { return xg::pow(a[0], 3.0); }, x, "pow 3");
    check_second_order([](const Inputs& a) { return xg::pow(a[0], 0.0); }, x, "pow 0");
    check_second_order([](const Inputs& a) { return xg::pow(a[0], -1.5); }, positive, "pow -1.5");
    check_second_order([](const Inputs& a) { return xg::tanh(a[0]); }, x, "tanh");
    check_second_order([](const Inputs& a) { return xg::sigmoid(a[0]); }, x, "sigmoid");
    check_second_order([](const Inputs& a) { return xg::erf(a[0]); }, x, "erf");
    check_second_order([](const Inputs& a) { return xg::sin(a[0]); }, x, "sin");
    check_second_order([](const Inputs& a) { return xg::cos(a[0]); }, x, "cos");
    // piecewise linear: second derivative 0 away from the kinks (random inputs miss them)
    check_second_order([](const Inputs& a) { return xg::relu(a[0]) * a[0]; }, x, "relu(x)*x");
    check_second_order([](const Inputs& a) { return xg::abs(a[0]) * a[0]; }, x, "abs(x)*x");
    check_second_order([](const Inputs& a) { return xg::clamp(a[0], -0.5, 0.5) * a[0]; }, x, "clamp(x)*x");
}

TEST_CASE("gradgradcheck of reductions, shape ops and matmul", "[gradgradcheck]") {
    const Inputs x = {randn_leaf({2, 3, 4}, 21)};
    check_second_order([](const Inputs& a) { return xg::sum(xg::exp(a[0]), xg::Axes{1}); }, x, "sum axis 1 of exp");
    check_second_order([](const Inputs& a) { return xg::sum(a[0] * a[0]); }, x, "sum of squares (0-D)");
    check_second_order([](const Inputs& a) { return xg::mean(xg::tanh(a[0]), xg::Axes{0, 2}, true); }, x, "mean keepdim of tanh");
    check_second_order([](const Inputs& a) { return xg::reshape(a[0] * a[0], {6, 4}); }, x, "reshape");
    check_second_order([](const Inputs& a) { return xg::transpose(a[0] * a[0], 0, 2); }, x, "transpose");
    check_second_order([](const Inputs& a) { return xg::permute(xg::sin(a[0]), {2, 0, 1}); }, x, "permute");
    check_second_order([](const Inputs& a) { return xg::expand(a[0] * a[0], {2, 2, 3}); }, {randn_leaf({2, 1, 3}, 22)}, "expand");
    check_second_order([](const Inputs& a) { return xg::sum_to(a[0] * a[0], {1, 3}); }, {randn_leaf({2, 4, 3}, 23)}, "sum_to");
    check_second_order([](const Inputs& a) { return xg::matmul(a[0], a[1]); }, {randn_leaf({3, 4}, 24), randn_leaf({4, 2}, 25)},
                       "matmul 2-D");
    check_second_order([](const Inputs& a) { return xg::matmul(a[0], a[1]); },
                       {randn_leaf({2, 3, 4}, 26), randn_leaf({4, 2}, 27)}, "matmul batched, broadcast right");
    check_second_order([](const Inputs& a) { return xg::matmul(a[0], a[1]); }, {randn_leaf({4}, 28), randn_leaf({4, 2}, 29)},
                       "matmul 1-D left");
    check_second_order([](const Inputs& a) { return xg::matmul(a[0], a[1]); },
                       {randn_leaf({3, 4}, 33), randn_leaf({2, 4, 2}, 34)}, "matmul batched, broadcast left");
    check_second_order([](const Inputs& a) { return xg::matmul(a[0], a[1]); },
                       {randn_leaf({2, 1, 2, 3}, 35), randn_leaf({3, 3, 2}, 36)}, "matmul batched, broadcast both");
    // a small MLP: every op of it at once, N = 1
    check_second_order([](const Inputs& a) { return xg::sum(xg::tanh(xg::matmul(a[0], a[1]) + a[2])); },
                       {randn_leaf({1, 3}, 30), randn_leaf({3, 2}, 31), randn_leaf({2}, 32)}, "tanh MLP layer N=1");
}

TEST_CASE("gradgradcheck of indexed_gemm, every transpose, summed and unwritten output matrices", "[gradgradcheck]") {
    // matmul's backward makes (F, T) and (T, F) products, whose backwards make (F, F), (F, T) and
    // (T, F) again; (T, T) is checked here too, with the products of indexed_gemm_cases.hpp
    using namespace xg::test::indexed_gemm_cases;
    for (const bool ta : {false, true}) {
        for (const bool tb : {false, true}) {
            check_second_order([ta, tb](const Inputs& x) { return products(x[0], ta, x[1], tb); },
                               {randn_leaf(a_shape(ta), 42), randn_leaf(b_shape(tb), 43)},
                               std::string("indexed_gemm ta ") + (ta ? "T" : "F") + ", tb " + (tb ? "T" : "F"));
        }
    }
}

TEST_CASE("gradgradcheck catches a wrong double backward", "[gradgradcheck]") {
    // cube(x) = x^3 with a correct first derivative 3x^2 g, but a create_graph backward that
    // treats one x as a constant: d/dx (3 x x_const g) = 3 x g instead of 6 x g.
    auto cube = [](const Tensor& x) {
        const xg::Array out = x.value() * x.value() * x.value();
        return xg::record(
            "cube", out, {x},
            [](const xg::GradContext& c) -> xg::Grads { return {xg::Array(3.0 * c.grad * c.input(0) * c.input(0))}; }, {},
            [](const xg::BackwardContext& c) -> std::vector<Tensor> { return {3.0 * c.grad * c.input(0) * c.input(0).detach()}; });
    };
    const Inputs x = {randn_leaf({3}, 41)};
    const auto f = [&](const Inputs& a) { return cube(a[0]); };
    const xg::GradcheckResult first = xg::gradcheck(f, x, {"cube, first order"});
    CHECK(first.ok);
    const xg::GradcheckResult second = xg::gradgradcheck(f, x, {"cube with a wrong double backward (must FAIL)"});
    INFO(second.report());
    CHECK_FALSE(second.ok);
    CHECK(second.name == "cube with a wrong double backward (must FAIL) (second order)");
    // the analytic and numerical second derivatives differ by half: 3 x g vs 6 x g
    CHECK(second.worst_analytic == Approx(0.5 * second.worst_numerical).epsilon(1e-6));
}

TEST_CASE("gradgradcheck of var", "[gradgradcheck]") {
    check_second_order([](const Inputs& a) { return xg::var(a[0], xg::Axes{1}, true, false); }, {randn_leaf({3, 4}, 81)},
                       "var unbiased axis 1");
    check_second_order([](const Inputs& a) { return xg::var(a[0], xg::Axes{0, 2}, false, true); }, {randn_leaf({2, 3, 2}, 82)},
                       "var biased keepdim");
}

}  // namespace xg_test_ops_gradgrad
