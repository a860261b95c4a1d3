// batch_norm on hard inputs: mean 1e6, tiny variances, a single channel, two samples per channel.
#include <algorithm>
#include <cmath>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/engine/random.hpp"
#include "nn/functional/functional.hpp"
#include "tests/support/norm_kit.hpp"
#include "tests/support/op_runs.hpp"

namespace xg_test_batch_norm_robustness {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using xg::Array;
using xg::Tensor;
using xg::test::all_finite;
using xg::test::randn_array;
using xg::test::run;

// Exact (long double) batch-norm output for channel k of a (N, C) array, biased variance.
long double bn_exact(const Array& x, std::size_t n, std::size_t k, long double eps) {
    const auto [mean, var] = xg::test::exact_moments(x.shape()[0], [&](std::size_t i) { return x(i, k); });
    return (x(n, k) - mean) / std::sqrt(var + eps);
}

TEST_CASE("batch_norm at mean 1e6 and at tiny variances matches the exact result", "[robustness]") {
    xg::manual_seed(31);
    struct Case {
        const char* name;
        double scale, shift, eps, tolerance;
    };
    // Tolerances: at mean 1e6 one rounding of x is 1e6 * 2^-53 ~ 1e-10 of a unit-spread value.
    // At spread 1e-6 the inputs carry ~1e-10 relative precision of their spread (x ~ 1).
    for (const Case& c : {Case{"mean 1e6, unit spread", 1.0, 1e6, 1e-5, 1e-9},
                          Case{"spread 1e-6, eps 1e-8", 1e-6, 1.0, 1e-8, 1e-8},
                          Case{"spread 1e-6, eps 1e-5", 1e-6, 1.0, 1e-5, 1e-8}}) {
        const Array x = randn_array({16, 3}) * c.scale + c.shift;
        const Array g = randn_array({16, 3});
        const double eps = c.eps;
        for (bool composed : {false, true}) {
            const auto bn = composed ? F::batch_norm_composed : F::batch_norm;
            const auto r = run([&](auto& t) { return bn(t[0], Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, eps); },
                               {x}, g);
            double worst = 0, peak = 0;
            for (std::size_t n = 0; n < 16; ++n) {
                for (std::size_t k = 0; k < 3; ++k) {
                    const long double y = bn_exact(x, n, k, eps);
                    worst = std::max(worst, static_cast<double>(std::abs(r[0](n, k) - y)));
                    peak = std::max(peak, static_cast<double>(std::abs(y)));
                }
            }
            fmt::print("robustness: batch_norm{} {}: max |y - exact| / max |y| = {:.2e}\n", composed ? "_composed" : "",
                       c.name, worst / peak);
            INFO(c.name << (composed ? " (composed)" : " (fused)"));
            CHECK(worst <= c.tolerance * peak);
            CHECK(all_finite(r));
        }
    }
}

TEST_CASE("batch_norm with a single channel and with two samples per channel", "[robustness]") {
    xg::manual_seed(32);
    const Array x1 = randn_array({5, 1}), w = randn_array({1}), b = randn_array({1});
    const auto one = run([](auto& t) { return F::batch_norm(t[0], Tensor(), Tensor(), t[1], t[2], true); }, {x1, w, b},
                         randn_array({5, 1}));
    CHECK(all_finite(one));
    double s = 0;
    for (std::size_t n = 0; n < 5; ++n) s += one[1](n, 0);
    CHECK(std::abs(s) <= 1e-14 * (1 + std::abs(one[1](0, 0))));  // d/dx sums to zero per channel
    // N = 2: x_hat = +-1 / sqrt(1 + eps / var), whatever the values.
    const Array x2 = {{3.0, -7.0}, {5.0, 1e6}};
    const auto two = run([](auto& t) { return F::batch_norm(t[0], Tensor(), Tensor(), Tensor(), Tensor(), true); }, {x2},
                         randn_array({2, 2}));
    CHECK(two[0](0, 0) == Approx(-1.0 / std::sqrt(1.0 + 1e-5 / 1.0)).epsilon(1e-14));
    CHECK(two[0](1, 1) == Approx(1.0).epsilon(1e-14));
    CHECK(all_finite(two));
}

}  // namespace xg_test_batch_norm_robustness
