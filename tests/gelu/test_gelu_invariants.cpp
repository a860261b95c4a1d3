// gelu, fused and composed, is finite and right at 0, +-1e-3, +-10, +-30.
#include <cmath>

#include <catch2/catch.hpp>

#include "nn/functional/functional.hpp"
#include "tests/support/op_runs.hpp"

namespace xg_test_gelu_invariants {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using xg::Array;
using xg::test::run;

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

}  // namespace xg_test_gelu_invariants
