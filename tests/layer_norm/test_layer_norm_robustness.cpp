// The composed layer_norm on the rows that are hard for the fused one: mean 1e6, constant, H = 1,
// tiny variance.
#include <algorithm>
#include <cmath>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/engine/random.hpp"
#include "nn/functional/functional.hpp"
#include "tests/support/norm_kit.hpp"
#include "tests/support/op_runs.hpp"

namespace xg_test_layer_norm_robustness {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using xg::Array;
using xg::test::all_finite;
using xg::test::randn_array;
using xg::test::run;

TEST_CASE("composed layer_norm on hard rows: mean 1e6, constant, H = 1, tiny variance", "[robustness]") {
    xg::manual_seed(33);
    const auto ln = [](double eps) {
        return [eps](auto& t) { return F::layer_norm_composed(t[0], {t[0].shape().back()}, t[1], t[2], eps); };
    };
    const Array w = randn_array({8}), b = randn_array({8});
    const Array big = randn_array({3, 8}) + 1e6;
    const auto r = run(ln(1e-5), {big, w, b}, randn_array({3, 8}));
    double worst = 0;
    for (std::size_t i = 0; i < 3; ++i) {
        const auto [mean, var] = xg::test::exact_moments(8, [&](std::size_t j) { return big(i, j); });
        for (std::size_t j = 0; j < 8; ++j) {
            const long double y = (big(i, j) - mean) / std::sqrt(var + 1e-5L) * w(j) + b(j);
            worst = std::max(worst, static_cast<double>(std::abs(r[0](i, j) - y)));
        }
    }
    fmt::print("robustness: layer_norm_composed at mean 1e6: max |y - exact| = {:.2e}\n", worst);
    CHECK(worst <= 1e-9);
    CHECK(all_finite(r));
    for (double eps : {1e-5, 1e-8}) {
        // A constant row gives beta only up to the rounding of the composed mean (a few ulps of
        // the constant) amplified by 1 / sqrt(eps); the fused op is exact (test_fused_invariants).
        const double constant = 1e6 + 0.3;
        const auto c = run(ln(eps), {xg::full({2, 8}, constant).value(), w, b}, randn_array({2, 8}));
        const double bound = 4 * (std::nextafter(constant, 2e6) - constant) / std::sqrt(eps);
        for (std::size_t j = 0; j < 8; ++j) CHECK(std::abs(c[0](1, j) - b(j)) <= bound * std::abs(w(j)));
        CHECK(all_finite(c));
        const auto tiny = run(ln(eps), {randn_array({2, 8}) * 1e-6 + 1.0, w, b}, randn_array({2, 8}));
        CHECK(all_finite(tiny));
    }
    const Array w1 = randn_array({1}), b1 = randn_array({1});
    const auto h1 = run(ln(1e-5), {randn_array({4, 1}), w1, b1}, randn_array({4, 1}));
    for (std::size_t i = 0; i < 4; ++i) CHECK(h1[0](i, 0) == b1(0));
    CHECK(all_finite(h1));
}

}  // namespace xg_test_layer_norm_robustness
