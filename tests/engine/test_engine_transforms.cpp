// xg::vjp, jvp, jacobian, hessian, hvp on problems whose answers are known in closed form.
#include <catch2/catch.hpp>

#include <cmath>

#include "core/ops/ops.hpp"
#include "core/engine/random.hpp"
#include "core/tools/transforms.hpp"
#include "nn/functional/functional.hpp"

namespace xg_test_engine_transforms {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using xg::Tensor;

namespace {

// f(x) = (x0^2 x1, sin x1, x0 + x2): J = [[2 x0 x1, x0^2, 0], [0, cos x1, 0], [1, 0, 1]]
Tensor small_map(const Tensor& x) {
    const Tensor x0 = xg::narrow(x, 0, 0, 1), x1 = xg::narrow(x, 0, 1, 1), x2 = xg::narrow(x, 0, 2, 1);
    return xg::cat({x0 * x0 * x1, xg::sin(x1), x0 + x2});
}

}  // namespace

TEST_CASE("jacobian, vjp and jvp of a small map", "[autograd][transforms]") {
    const Tensor x({0.5, -1.25, 2.0});
    const double a = 0.5, b = -1.25;
    const Tensor J = xg::jacobian(small_map, x);
    REQUIRE(J.shape() == xg::Shape{3, 3});
    const double expected[3][3] = {{2 * a * b, a * a, 0}, {0, std::cos(b), 0}, {1, 0, 1}};
    for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 3; ++j) CHECK(J(i, j) == Approx(expected[i][j]).margin(1e-15));
    }
    const Tensor v({1.0, -2.0, 0.5}), u({0.25, 1.0, -1.0});
    const auto [y, vJ] = xg::vjp(small_map, x, v);
    CHECK(y(1) == Approx(std::sin(b)));
    for (int j = 0; j < 3; ++j) {
        double want = 0.0;
        for (int i = 0; i < 3; ++i) want += v(i) * expected[i][j];
        CHECK(vJ(j) == Approx(want).margin(1e-15));
    }
    // jvp by the double-vjp trick differentiates the backward of narrow and cat
    const auto [yu, Ju_map] = xg::jvp(small_map, x, u);
    CHECK(yu(1) == Approx(std::sin(b)));
    for (int i = 0; i < 3; ++i) {
        double want = 0.0;
        for (int j = 0; j < 3; ++j) want += expected[i][j] * u(j);
        CHECK(Ju_map(i) == Approx(want).margin(1e-15));
    }
    // an op without a double backward (a kernel only): jvp through it says which op
    const auto kernel_only = [](const Tensor& t) {
        return xg::record("twice_by_kernel", xg::Array(2.0 * t.value()), {t},
                          [](const xg::GradContext& c) -> xg::Grads { return {xg::Array(2.0 * c.grad)}; });
    };
    CHECK_THROWS_WITH(xg::jvp(kernel_only, x, u), Catch::Contains("'twice_by_kernel' has no double backward"));
    const auto smooth = [](const Tensor& t) { return xg::tanh(t) * t + t * 2.0; };  // J = diag(tanh' t + tanh t + 2)
    const auto [ys, Ju] = xg::jvp(smooth, x, u);
    for (int i = 0; i < 3; ++i) {
        const double t = x(i), th = std::tanh(t);
        CHECK(Ju(i) == Approx(((1 - th * th) * t + th + 2) * u(i)).epsilon(1e-14));
    }
    CHECK_THROWS_WITH(xg::vjp(small_map, x, Tensor({1.0})), Catch::Contains("vjp: v has shape (1,) but needs (3,)"));
}

TEST_CASE("hessian and hvp agree with the closed form and with each other", "[autograd][transforms]") {
    // f(x) = sum(x^3) + x0 x1: H = diag(6 x) + [[0,1],[1,0]] on the first two
    const auto f = [](const Tensor& x) {
        return xg::sum(xg::pow(x, 3.0)) + xg::sum(xg::narrow(x, 0, 0, 1) * xg::narrow(x, 0, 1, 1));
    };
    const Tensor x({1.0, -2.0, 0.5});
    // the same function written with constant masks instead of narrow (recorded as slice)
    const Tensor mask({0.0, 1.0, 0.0});
    const auto g = [&mask](const Tensor& x) {
        const Tensor x0 = xg::sum(x * Tensor({1.0, 0.0, 0.0}));
        return xg::sum(xg::pow(x, 3.0)) + x0 * xg::sum(x * mask);
    };
    const Tensor H = xg::hessian(g, x), H_sliced = xg::hessian(f, x);
    const double want[3][3] = {{6.0, 1.0, 0.0}, {1.0, -12.0, 0.0}, {0.0, 0.0, 3.0}};
    for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 3; ++j) {
            CHECK(H(i, j) == Approx(want[i][j]).margin(1e-14));
            CHECK(H_sliced(i, j) == Approx(want[i][j]).margin(1e-14));
        }
    }
    const Tensor v({0.5, 1.0, -2.0});
    const auto [y, Hv] = xg::hvp(g, x, v);
    for (int i = 0; i < 3; ++i) {
        double w = 0.0;
        for (int j = 0; j < 3; ++j) w += want[i][j] * v(j);
        CHECK(Hv(i) == Approx(w).margin(1e-14));
    }
    CHECK_THROWS_WITH(xg::hessian([](const Tensor& t) { return t * 2.0; }, x), Catch::Contains("hessian: f must return one element"));
}

TEST_CASE("a Newton step solves a quadratic in one step (DeZero's classic)", "[autograd][transforms]") {
    // f(x) = sum((A x - b)^2) with a diagonal A: the minimum is x = b / A
    const Tensor A({2.0, -0.5, 4.0}), b({1.0, 3.0, -2.0});
    const auto f = [&](const Tensor& x) { return xg::sum(xg::pow(A * x - b, 2.0)); };
    Tensor x({0.0, 0.0, 0.0});
    const Tensor H = xg::hessian(f, x);
    const auto [y, grad] = xg::vjp(f, x, xg::scalar(1.0));
    for (int i = 0; i < 3; ++i) x.mutable_value()(i) -= grad(i) / H(i, i);  // H is diagonal here
    for (int i = 0; i < 3; ++i) CHECK(x(i) == Approx(b(i) / A(i)).epsilon(1e-14));
}

TEST_CASE("hvp through layer_norm: fused and composed agree", "[autograd][transforms]") {
    xg::Generator gen(5);
    const Tensor x = xg::randn({2, 5}, gen), target = xg::randn({2, 5}, gen), v = xg::randn({2, 5}, gen);
    namespace F = xg::nn::functional;
    const auto loss = [&](bool fused) {
        return [&, fused](const Tensor& t) {
            const Tensor y = fused ? F::layer_norm(t, {5}) : F::layer_norm_composed(t, {5});
            return xg::sum(xg::pow(y - target, 2.0));
        };
    };
    const Tensor a = xg::hvp(loss(true), x, v).second, c = xg::hvp(loss(false), x, v).second;
    for (std::size_t i = 0; i < a.numel(); ++i) CHECK(std::fabs(a.value().data()[i] - c.value().data()[i]) <= 1e-10);
}

}  // namespace xg_test_engine_transforms
