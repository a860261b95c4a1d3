// The composed gelu is finite and agrees with the fused one at 0, +-1e-3, +-10, +-30.
#include <cmath>

#include <catch2/catch.hpp>

#include "nn/functional/functional.hpp"
#include "tests/support/op_runs.hpp"

namespace xg_test_gelu_robustness {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using xg::test::all_finite;
using xg::test::run;

TEST_CASE("composed gelu is finite and agrees with the fused one at 0, +-1e-3, +-10, +-30", "[robustness]") {
    const xg::Array x = {0.0, 1e-3, -1e-3, 10.0, -10.0, 30.0, -30.0};
    const xg::Array g = xt::ones<double>({7});
    for (auto approx : {F::GeluApproximate::none, F::GeluApproximate::tanh}) {
        const auto fused = run([approx](auto& t) { return F::gelu(t[0], approx); }, {x}, g);
        const auto composed = run([approx](auto& t) { return F::gelu_composed(t[0], approx); }, {x}, g);
        CHECK(all_finite(fused));
        CHECK(all_finite(composed));
        for (std::size_t i = 0; i < 7; ++i) {
            INFO("x = " << x(i));
            // Relative: the ~x^2-ulp conditioning of test_fused_invariants. Absolute: the composed
            // 1 + erf(x / sqrt 2) (and 1 + tanh(...)) cancels for x << 0, leaving only ~1e-16
            // absolute accuracy of the factor, times |x| (PyTorch's formula has the same limit;
            // the fused op stays relatively exact down to -30, test_fused_invariants).
            const double tol = 1e-15 * (1.0 + x(i) * x(i)), margin = 1e-15 * (1.0 + std::abs(x(i)));
            CHECK(composed[0](i) == Approx(fused[0](i)).epsilon(tol).margin(margin));
            CHECK(composed[1](i) == Approx(fused[1](i)).epsilon(tol).margin(margin));
        }
    }
}

}  // namespace xg_test_gelu_robustness
