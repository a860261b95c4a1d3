// Properties of the fused ops that hold by the math, not by a reference run: fused == composed,
// gradients of the normalisations sum to zero (and are orthogonal to x-hat exactly when eps = 0),
// exact outputs on constant rows, precision at mean 1e6 and tiny variances, GELU's tails, the
// recurrent kernels' tanh against std::tanh, and the error messages for bad shapes.
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/engine/random.hpp"
#include "nn/functional/functional.hpp"
#include "nn/fast/gate_math.hpp"
#include "nn/fast/kernel_primitives.hpp"
#include "tests/support/fixtures.hpp"

namespace xg_test_fused_invariants {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using xg::Array;
using xg::Shape;
using xg::Tensor;
using Catch::Matchers::Contains;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// Output and input gradients of f(inputs) for upstream gradient `g`, on fresh leaf copies.
std::vector<Array> run(const Fn& f, const std::vector<Array>& inputs, const Array& g) {
    std::vector<Tensor> leaves;
    for (const Array& a : inputs) leaves.emplace_back(a, true);
    Tensor y = f(leaves);
    y.backward(Tensor(g));
    std::vector<Array> out{y.value()};
    for (const Tensor& t : leaves) out.push_back(t.grad_value());
    return out;
}

void expect_twins_agree(const Fn& fused, const Fn& composed, const std::vector<Array>& inputs, const std::string& name) {
    std::vector<Tensor> plain(inputs.begin(), inputs.end());
    const Array g = xg::randn(fused(plain).shape()).value();
    const std::vector<Array> a = run(fused, inputs, g), b = run(composed, inputs, g);
    double worst = 0.0;
    for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, xg::test::max_rel_diff(a[i], b[i]));
    INFO(name);
    CHECK(worst <= 1e-12);
    fmt::print("fused vs composed {:<40} worst rel diff {:.2e}\n", name, worst);
}

Array randn(const Shape& s) { return xg::randn(s).value(); }

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const xg::Error& e) {
        return e.what();
    }
    return "<no xg::Error thrown>";
}

bool all_finite(const Array& a) {
    return std::all_of(a.begin(), a.end(), [](double v) { return std::isfinite(v); });
}

}  // namespace

TEST_CASE("fused ops agree with their composed twins in value and gradient", "[fused][invariants]") {
    xg::manual_seed(21);
    for (const Shape& xs : {Shape{6, 5}, Shape{3, 4, 5}}) {
        const std::string d = xg::shape_str(xs);
        const Array x = randn(xs), w5 = randn({5}), b5 = randn({5});
        expect_twins_agree([](auto& t) { return F::linear(t[0], t[1], t[2]); },
                           [](auto& t) { return F::linear_composed(t[0], t[1], t[2]); }, {x, randn({3, 5}), randn({3})},
                           "linear " + d);
        for (auto m : {F::GeluApproximate::none, F::GeluApproximate::tanh}) {
            expect_twins_agree([m](auto& t) { return F::gelu(t[0], m); }, [m](auto& t) { return F::gelu_composed(t[0], m); },
                               {x}, (m == F::GeluApproximate::none ? "gelu " : "gelu tanh ") + d);
        }
        expect_twins_agree([](auto& t) { return F::layer_norm(t[0], {5}, t[1], t[2]); },
                           [](auto& t) { return F::layer_norm_composed(t[0], {5}, t[1], t[2]); }, {x, w5, b5},
                           "layer_norm " + d);
        expect_twins_agree([](auto& t) { return F::rms_norm(t[0], {5}, t[1]); },
                           [](auto& t) { return F::rms_norm_composed(t[0], {5}, t[1]); }, {x, w5}, "rms_norm " + d);
        const Array wc = randn({xs[1]}), bc = randn({xs[1]});
        for (bool training : {true, false}) {
            Tensor rm(randn({xs[1]})), rv(xg::uniform({xs[1]}, 0.5, 2.0).value());
            expect_twins_agree([=](auto& t) { return F::batch_norm(t[0], rm.detach(), rv.detach(), t[1], t[2], training); },
                               [=](auto& t) { return F::batch_norm_composed(t[0], rm.detach(), rv.detach(), t[1], t[2], training); },
                               {x, wc, bc}, std::string(training ? "batch_norm train " : "batch_norm eval ") + d);
        }
    }
    const Array x3 = randn({2, 3, 4});
    expect_twins_agree([](auto& t) { return F::layer_norm(t[0], {3, 4}, t[1], t[2]); },
                       [](auto& t) { return F::layer_norm_composed(t[0], {3, 4}, t[1], t[2]); },
                       {x3, randn({3, 4}), randn({3, 4})}, "layer_norm over (3, 4)");
}

// Outputs of 4 MiB and more take the streaming-store path of the kernels (nn/fast/kernel_primitives.hpp);
// these shapes cover it with row and column tails (widths not a multiple of 8, row counts not a
// multiple of 4) and the ordinary path for an odd width at the same size; BatchNorm's short rows
// ((8195, 130): 1040 bytes, walked from the end in blocks of 8) with a column tail of 2.
TEST_CASE("fused normalisations agree with their twins on outputs large enough to stream", "[fused][invariants]") {
    xg::manual_seed(24);
    const auto size_of = [](const Shape& s) { return std::accumulate(s.begin(), s.end(), std::size_t{1}, std::multiplies<>()); };
    for (const Shape& xs : {Shape{1030, 1020}, Shape{1100, 1001}}) {
        const Array x = randn(xs);
        CHECK(xg::nn::detail::streams(x.data(), size_of(xs), xs[1]) == (xs[1] % 2 == 0));
        expect_twins_agree([&](auto& t) { return F::layer_norm(t[0], {xs[1]}, t[1], t[2]); },
                           [&](auto& t) { return F::layer_norm_composed(t[0], {xs[1]}, t[1], t[2]); },
                           {x, randn({xs[1]}), randn({xs[1]})}, "layer_norm " + xg::shape_str(xs));
        expect_twins_agree([&](auto& t) { return F::rms_norm(t[0], {xs[1]}, t[1]); },
                           [&](auto& t) { return F::rms_norm_composed(t[0], {xs[1]}, t[1]); }, {x, randn({xs[1]})},
                           "rms_norm " + xg::shape_str(xs));
    }
    for (const Shape& xs : {Shape{2051, 516}, Shape{8195, 130}, Shape{65, 16, 1030}}) {
        const std::size_t width = xs.size() == 2 ? xs[1] : xs[2];
        const Array x = randn(xs);
        CHECK(xg::nn::detail::streams(x.data(), size_of(xs), width));
        Tensor rm(randn({xs[1]})), rv(xg::uniform({xs[1]}, 0.5, 2.0).value());
        for (bool training : {true, false}) {
            expect_twins_agree([=](auto& t) { return F::batch_norm(t[0], rm.detach(), rv.detach(), t[1], t[2], training); },
                               [=](auto& t) { return F::batch_norm_composed(t[0], rm.detach(), rv.detach(), t[1], t[2], training); },
                               {x, randn({xs[1]}), randn({xs[1]})},
                               std::string(training ? "batch_norm train " : "batch_norm eval ") + xg::shape_str(xs));
        }
    }
    // GroupNorm streams per channel, so only with an even spatial size; few samples keep the sums
    // behind dw, db at N S = 4120 terms
    for (const Shape& xs : {Shape{4, 128, 1030}, Shape{4, 128, 1025}}) {
        const Array x = randn(xs);
        CHECK(xg::nn::detail::streams(x.data(), size_of(xs), xs[2]) == (xs[2] % 2 == 0));
        expect_twins_agree([](auto& t) { return F::group_norm(t[0], 4, t[1], t[2]); },
                           [](auto& t) { return F::group_norm_composed(t[0], 4, t[1], t[2]); }, {x, randn({xs[1]}), randn({xs[1]})},
                           "group_norm 4 groups " + xg::shape_str(xs));
    }
}

TEST_CASE("batch_norm fused and composed update running statistics identically", "[fused][invariants]") {
    xg::manual_seed(22);
    Tensor x(randn({4, 3, 5}));
    Tensor rm1 = xg::zeros({3}), rv1 = xg::ones({3}), rm2 = xg::zeros({3}), rv2 = xg::ones({3});
    F::batch_norm(x, rm1, rv1, Tensor(), Tensor(), true, 0.3);
    F::batch_norm_composed(x, rm2, rv2, Tensor(), Tensor(), true, 0.3);
    CHECK(xg::test::max_rel_diff(rm1.value(), rm2.value()) <= 1e-15);
    CHECK(xg::test::max_rel_diff(rv1.value(), rv2.value()) <= 1e-15);
}

// Shifting a row leaves y unchanged, so dx sums to zero along it, for any eps and weight.
// Scaling a row leaves y unchanged only when eps = 0, so only then dx is orthogonal to x-hat;
// with eps > 0 the inner product is exactly eps * rstd^3 * sum(dxhat * xhat) (docs/derivations).
TEST_CASE("layer_norm input gradient: sums to zero, orthogonal to x-hat iff eps = 0", "[fused][invariants]") {
    xg::manual_seed(23);
    const std::size_t R = 4, D = 6;
    const Array x = randn({R, D}) * 3.0 + 2.0, w = randn({D}), b = randn({D}), g = randn({R, D});
    for (double eps : {0.0, 1e-5, 0.5}) {
        const Array dx = run([eps](auto& t) { return F::layer_norm(t[0], {D}, t[1], t[2], eps); }, {x, w, b}, g)[1];
        for (std::size_t r = 0; r < R; ++r) {
            double mean = 0, var = 0;
            for (std::size_t j = 0; j < D; ++j) mean += x(r, j) / D;
            for (std::size_t j = 0; j < D; ++j) var += (x(r, j) - mean) * (x(r, j) - mean) / D;
            const double rstd = 1.0 / std::sqrt(var + eps);
            double sum_dx = 0, dot = 0, s = 0, scale = 0;
            for (std::size_t j = 0; j < D; ++j) {
                const double xhat = (x(r, j) - mean) * rstd;
                sum_dx += dx(r, j);
                dot += dx(r, j) * xhat;
                s += g(r, j) * w(j) * xhat;
                scale += std::abs(dx(r, j) * xhat);
            }
            INFO("eps " << eps << " row " << r);
            CHECK(std::abs(sum_dx) <= 1e-14 * scale);
            CHECK(std::abs(dot - eps * rstd * rstd * rstd * s) <= 1e-14 * scale);
            if (eps == 0.5) CHECK(std::abs(dot) > 1e-3 * scale);  // the eps term is real, not rounding
        }
    }
}

TEST_CASE("batch_norm training gradient sums to zero per channel, orthogonal to x-hat when eps = 0",
          "[fused][invariants]") {
    xg::manual_seed(24);
    const Array x = randn({5, 3, 4}) * 2.0 - 1.0, w = randn({3}), b = randn({3}), g = randn({5, 3, 4});
    const Array dx = run([](auto& t) { return F::batch_norm(t[0], Tensor(), Tensor(), t[1], t[2], true, 0.1, 0.0); },
                         {x, w, b}, g)[1];
    for (std::size_t c = 0; c < 3; ++c) {
        double mean = 0, sum_dx = 0, dot = 0, scale = 0;
        for (std::size_t n = 0; n < 5; ++n)
            for (std::size_t l = 0; l < 4; ++l) mean += x(n, c, l) / 20.0;
        for (std::size_t n = 0; n < 5; ++n) {
            for (std::size_t l = 0; l < 4; ++l) {
                sum_dx += dx(n, c, l);
                dot += dx(n, c, l) * (x(n, c, l) - mean);
                scale += std::abs(dx(n, c, l) * (x(n, c, l) - mean));
            }
        }
        CHECK(std::abs(sum_dx) <= 1e-14 * scale);
        CHECK(std::abs(dot) <= 1e-14 * scale);
    }
}

TEST_CASE("rms_norm input gradient is orthogonal to x when eps = 0", "[fused][invariants]") {
    xg::manual_seed(25);
    const Array x = randn({3, 7}), w = randn({7}), g = randn({3, 7});
    const Array dx = run([](auto& t) { return F::rms_norm(t[0], {7}, t[1], 0.0); }, {x, w}, g)[1];
    for (std::size_t r = 0; r < 3; ++r) {
        double dot = 0, scale = 0;
        for (std::size_t j = 0; j < 7; ++j) {
            dot += dx(r, j) * x(r, j);
            scale += std::abs(dx(r, j) * x(r, j));
        }
        CHECK(std::abs(dot) <= 1e-14 * scale);
    }
}

TEST_CASE("layer_norm rows with mean 1e6 and unit spread are exact to ~1e-10", "[fused][invariants]") {
    xg::manual_seed(26);
    const std::size_t R = 5, D = 16;
    Array x = randn({R, D}) + 1e6;
    const Array g = randn({R, D});
    const std::vector<Array> r = run([](auto& t) { return F::layer_norm(t[0], {D}); }, {x}, g);
    double worst_y = 0, worst_dx = 0;
    for (std::size_t i = 0; i < R; ++i) {
        // Reference in long double from the same (already rounded) double inputs.
        long double mean = 0, var = 0, sg = 0, sgx = 0;
        for (std::size_t j = 0; j < D; ++j) mean += static_cast<long double>(x(i, j)) / D;
        for (std::size_t j = 0; j < D; ++j) var += (x(i, j) - mean) * (x(i, j) - mean) / D;
        const long double rstd = 1.0L / std::sqrt(var + 1e-5L);
        for (std::size_t j = 0; j < D; ++j) {
            sg += g(i, j);
            sgx += g(i, j) * (x(i, j) - mean) * rstd;
        }
        for (std::size_t j = 0; j < D; ++j) {
            const long double xhat = (x(i, j) - mean) * rstd;
            const long double dx = rstd * (g(i, j) - sg / D - xhat * sgx / D);
            worst_y = std::max(worst_y, static_cast<double>(std::abs(r[0](i, j) - xhat)));
            worst_dx = std::max(worst_dx, static_cast<double>(std::abs(r[1](i, j) - dx)));
        }
    }
    fmt::print("layer_norm at mean 1e6: max |y - exact| {:.2e}, max |dx - exact| {:.2e}\n", worst_y, worst_dx);
    CHECK(worst_y <= 1e-10);
    CHECK(worst_dx <= 1e-10);
}

TEST_CASE("constant rows and channels return beta exactly with finite gradients", "[fused][invariants]") {
    for (double eps : {1e-5, 1e-8}) {
        for (std::size_t D : {3, 7, 768}) {
            for (double c : {0.1, -3.7, 1e6 + 0.3, 1.0 / 3.0}) {
                INFO("eps " << eps << " D " << D << " constant " << c);
                const Array x = xg::full({2, D}, c).value(), w = randn({D}), b = randn({D}), g = randn({2, D});
                const auto r = run([eps, D](auto& t) { return F::layer_norm(t[0], {D}, t[1], t[2], eps); }, {x, w, b}, g);
                for (std::size_t i = 0; i < 2; ++i)
                    for (std::size_t j = 0; j < D; ++j) REQUIRE(r[0](i, j) == b(j));
                CHECK((all_finite(r[1]) && all_finite(r[2]) && all_finite(r[3])));
                const Array xb = xg::full({D, 2, 3}, c).value(), wb = randn({2}), bb = randn({2});
                const auto s = run([eps](auto& t) { return F::batch_norm(t[0], Tensor(), Tensor(), t[1], t[2], true, 0.1, eps); },
                                   {xb, wb, bb}, randn({D, 2, 3}));
                for (std::size_t n = 0; n < D; ++n)
                    for (std::size_t k = 0; k < 2; ++k)
                        for (std::size_t l = 0; l < 3; ++l) REQUIRE(s[0](n, k, l) == bb(k));
                CHECK((all_finite(s[1]) && all_finite(s[2]) && all_finite(s[3])));
            }
        }
    }
}

TEST_CASE("layer_norm over a single element (H = 1) gives beta and zero input gradient", "[fused][invariants]") {
    const Array x = randn({4, 1}), w = randn({1}), b = randn({1});
    const auto r = run([](auto& t) { return F::layer_norm(t[0], {1}, t[1], t[2]); }, {x, w, b}, randn({4, 1}));
    for (std::size_t i = 0; i < 4; ++i) {
        CHECK(r[0](i, 0) == b(0));
        CHECK(r[1](i, 0) == 0.0);
    }
    CHECK(r[2](0) == 0.0);
}

TEST_CASE("layer_norm with tiny variances and small eps stays accurate", "[fused][invariants]") {
    xg::manual_seed(27);
    for (double eps : {1e-8, 1e-5}) {
        const Array x = randn({3, 10}) * 1e-6 + 1.0, g = randn({3, 10});
        const auto r = run([eps](auto& t) { return F::layer_norm(t[0], {10}, Tensor(), Tensor(), eps); }, {x}, g);
        double worst = 0, peak = 0;
        for (std::size_t i = 0; i < 3; ++i) {
            long double mean = 0, var = 0;
            for (std::size_t j = 0; j < 10; ++j) mean += static_cast<long double>(x(i, j)) / 10;
            for (std::size_t j = 0; j < 10; ++j) var += (x(i, j) - mean) * (x(i, j) - mean) / 10;
            for (std::size_t j = 0; j < 10; ++j) {
                const long double y = (x(i, j) - mean) / std::sqrt(var + eps);
                worst = std::max(worst, static_cast<double>(std::abs(r[0](i, j) - y)));
                peak = std::max(peak, static_cast<double>(std::abs(y)));
            }
        }
        fmt::print("layer_norm spread 1e-6, eps {:.0e}: max |y - exact| / max |y| = {:.2e}\n", eps, worst / peak);
        CHECK(worst <= 1e-9 * peak);
        CHECK(all_finite(r[1]));
    }
}

TEST_CASE("gelu is finite and right at 0, +-1e-3, +-10, +-30", "[fused][invariants]") {
    const Array x = {0.0, 1e-3, -1e-3, 10.0, -10.0, 30.0, -30.0};
    const Array g = xt::ones<double>({7});
    const auto exact = run([](auto& t) { return F::gelu(t[0]); }, {x}, g);
    const auto approx = run([](auto& t) { return F::gelu(t[0], F::GeluApproximate::tanh); }, {x}, g);
    for (std::size_t i = 0; i < 7; ++i) {
        const long double v = x(i);
        const long double cdf = 0.5L * std::erfc(-v / std::sqrt(2.0L));
        const long double pdf = std::exp(-0.5L * v * v) / std::sqrt(2.0L * 3.14159265358979323846264338327950288L);
        const long double k = std::sqrt(2.0L / 3.14159265358979323846264338327950288L), t = std::tanh(k * (v + 0.044715L * v * v * v));
        const long double y_tanh = 0.5L * v * (1 + t);
        const long double dy_tanh = 0.5L * (1 + t) + 0.5L * v * (1 - t * t) * k * (1 + 3 * 0.044715L * v * v);
        // In the tails gelu's condition number is ~x^2 (erfc(z) varies like exp(-z^2)), so the one
        // rounding of x/sqrt(2) alone moves the result by ~x^2 ulps: the tolerance scales with it.
        const double tol = 1e-15 * (1.0 + x(i) * x(i));
        INFO("x = " << x(i));
        CHECK(exact[0](i) == Approx(static_cast<double>(v * cdf)).epsilon(tol).margin(1e-300));
        CHECK(exact[1](i) == Approx(static_cast<double>(cdf + v * pdf)).epsilon(tol).margin(1e-300));
        CHECK(approx[0](i) == Approx(static_cast<double>(y_tanh)).epsilon(tol).margin(1e-300));
        CHECK(approx[1](i) == Approx(static_cast<double>(dy_tanh)).epsilon(tol).margin(1e-300));
    }
    CHECK(exact[0](0) == 0.0);
    CHECK(exact[1](0) == 0.5);
    CHECK(exact[0](3) == 10.0);   // Phi(10) rounds to 1
    CHECK(exact[0](6) < 0.0);     // -30 Phi(-30) ~ -1.5e-196: tiny but not flushed to zero
}

TEST_CASE("the recurrent kernels' tanh is within 2 ulp of the exact value and keeps its special values", "[fused][invariants]") {
    // |f(x) - tanh(x)| in units in the last place of the double nearest tanh(x), against long
    // double tanhl (11 more bits on x86-64).
    const auto ulps = [](double (*f)(double), double x) {
        const long double exact = std::tanh(static_cast<long double>(x));
        const double nearest = static_cast<double>(exact);
        const double ulp = std::nextafter(std::fabs(nearest), std::numeric_limits<double>::infinity()) - std::fabs(nearest);
        return static_cast<double>(std::fabs(static_cast<long double>(f(x)) - exact) / ulp);
    };
    std::mt19937_64 engine(7);
    double worst = 0.0, worst_libm = 0.0;
    for (int k = 0; k < 400000; ++k) {
        double x = 0.0;
        switch (k % 4) {
        case 0: x = std::uniform_real_distribution<double>(-1.0, 1.0)(engine); break;
        case 1: x = std::uniform_real_distribution<double>(-25.0, 25.0)(engine); break;
        case 2: x = std::uniform_real_distribution<double>(0.6, 0.65)(engine) * (k % 8 == 2 ? 1.0 : -1.0); break;  // the switch
        default: x = std::ldexp(std::uniform_real_distribution<double>(-1.0, 1.0)(engine), -(k % 1070));  // down to subnormals
        }
        worst = std::max(worst, ulps(xg::nn::detail::tanh, x));
        worst_libm = std::max(worst_libm, ulps([](double v) { return std::tanh(v); }, x));
    }
    fmt::print("recurrent tanh: worst {:.2f} ulp over 400000 arguments (std::tanh: {:.2f})\n", worst, worst_libm);
    CHECK(worst <= 2.0);
    const double inf = std::numeric_limits<double>::infinity();
    CHECK(xg::nn::detail::tanh(0.0) == 0.0);
    CHECK(std::signbit(xg::nn::detail::tanh(-0.0)));
    CHECK(xg::nn::detail::tanh(inf) == 1.0);
    CHECK(xg::nn::detail::tanh(-inf) == -1.0);
    CHECK(xg::nn::detail::tanh(-800.0) == -1.0);
    CHECK(std::isnan(xg::nn::detail::tanh(std::numeric_limits<double>::quiet_NaN())));
}

TEST_CASE("fused ops reject bad shapes with xg::Error naming the op and shapes", "[fused][invariants]") {
    const Tensor x = xg::zeros({2, 3, 5});
    CHECK_THAT(error_of([&] { F::linear(x, xg::zeros({4, 6})); }),
               Contains("linear") && Contains("(2, 3, 5)") && Contains("(4, 6)") && Contains("in_features"));
    CHECK_THAT(error_of([&] { F::linear(x, xg::zeros({4, 5}), xg::zeros({3})); }), Contains("bias") && Contains("(3,)"));
    CHECK_THAT(error_of([&] { F::linear(x, xg::zeros({20})); }), Contains("2-D"));
    CHECK_THAT(error_of([&] { F::layer_norm(x, {3}); }),
               Contains("layer_norm") && Contains("normalized_shape (3,)") && Contains("(2, 3, 5)"));
    CHECK_THAT(error_of([&] { F::layer_norm(x, {3, 5}, xg::ones({5})); }),
               Contains("weight") && Contains("(3, 5)") && Contains("(5,)"));
    CHECK_THAT(error_of([&] { F::layer_norm(x, {5}, Tensor(), xg::ones({4})); }), Contains("bias"));
    CHECK_THAT(error_of([&] { F::layer_norm(x, {}); }), Contains("at least one axis"));
    CHECK_THAT(error_of([&] { F::layer_norm_composed(x, {2, 5}); }), Contains("layer_norm_composed"));
    CHECK_THAT(error_of([&] { F::rms_norm(x, {5}, xg::ones({3})); }), Contains("rms_norm") && Contains("weight"));
    CHECK_THAT(error_of([&] { F::rms_norm(x, {4}); }), Contains("does not match"));
    const Tensor bx = xg::zeros({6, 4});
    CHECK_THAT(error_of([&] { F::batch_norm(bx, Tensor(), Tensor(), xg::ones({3}), Tensor(), true); }),
               Contains("batch_norm") && Contains("weight") && Contains("(6, 4)") && Contains("4 channels"));
    CHECK_THAT(error_of([&] { F::batch_norm(bx, xg::zeros({5}), xg::ones({4}), Tensor(), Tensor(), true); }),
               Contains("running_mean") && Contains("(5,)"));
    CHECK_THAT(error_of([&] { F::batch_norm(bx, xg::zeros({4}), xg::ones({2}), Tensor(), Tensor(), false); }),
               Contains("running_var"));
    CHECK_THAT(error_of([&] { F::batch_norm(bx, Tensor(), Tensor(), Tensor(), Tensor(), false); }), Contains("running"));
    // (N, C, H, W) is accepted since BatchNorm2d (as PyTorch's (N, C, *)); an input without a channel axis is not.
    CHECK_THAT(error_of([&] { F::batch_norm(xg::zeros({4}), Tensor(), Tensor(), Tensor(), Tensor(), true); }),
               Contains("batch_norm") && Contains("(4,)"));
    for (const Shape& one : {Shape{1, 4}, Shape{1, 4, 1}}) {
        const Tensor t = xg::zeros(one);
        CHECK_THAT(error_of([&] { F::batch_norm(t, Tensor(), Tensor(), Tensor(), Tensor(), true); }),
                   Contains("Expected more than 1 value per channel when training") && Contains(xg::shape_str(one)));
        CHECK_THAT(error_of([&] { F::batch_norm_composed(t, Tensor(), Tensor(), Tensor(), Tensor(), true); }),
                   Contains("Expected more than 1 value per channel when training"));
    }
    // One value per channel is fine in eval mode (running statistics are used).
    CHECK_NOTHROW(F::batch_norm(xg::zeros({1, 4}), xg::zeros({4}), xg::ones({4}), Tensor(), Tensor(), false));
}

}  // namespace xg_test_fused_invariants
