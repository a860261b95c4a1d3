// What layer_norm must satisfy whatever the input: its input gradient sums to zero and is
// orthogonal to x-hat iff eps = 0, rows of mean 1e6, one element (H = 1) and tiny variances.
#include <cmath>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/engine/random.hpp"
#include "nn/functional/functional.hpp"
#include "tests/support/norm_kit.hpp"
#include "tests/support/op_runs.hpp"

namespace xg_test_layer_norm_invariants {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using xg::Array;
using xg::test::randn_array;
using xg::test::run;

// Shifting a row leaves y unchanged, so dx sums to zero along it, for any eps and weight.
// Scaling a row leaves y unchanged only when eps = 0, so only then dx is orthogonal to x-hat;
// with eps > 0 the inner product is exactly eps * rstd^3 * sum(dxhat * xhat) (docs/derivations).
TEST_CASE("layer_norm input gradient: sums to zero, orthogonal to x-hat iff eps = 0", "[fused][invariants]") {
    xg::manual_seed(23);
    const std::size_t R = 4, D = 6;
    const Array x = randn_array({R, D}) * 3.0 + 2.0, w = randn_array({D}), b = randn_array({D}), g = randn_array({R, D});
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

TEST_CASE("layer_norm rows with mean 1e6 and unit spread are exact to ~1e-10", "[fused][invariants]") {
    xg::manual_seed(26);
    const std::size_t R = 5, D = 16;
    Array x = randn_array({R, D}) + 1e6;
    const Array g = randn_array({R, D});
    const std::vector<Array> r = run([](auto& t) { return F::layer_norm(t[0], {D}); }, {x}, g);
    double worst_y = 0, worst_dx = 0;
    for (std::size_t i = 0; i < R; ++i) {
        // Reference in long double from the same (already rounded) double inputs.
        const auto [mean, var] = xg::test::exact_moments(D, [&](std::size_t j) { return x(i, j); });
        long double sg = 0, sgx = 0;
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

TEST_CASE("layer_norm over a single element (H = 1) gives beta and zero input gradient", "[fused][invariants]") {
    const Array x = randn_array({4, 1}), w = randn_array({1}), b = randn_array({1});
    const auto r = run([](auto& t) { return F::layer_norm(t[0], {1}, t[1], t[2]); }, {x, w, b}, randn_array({4, 1}));
    for (std::size_t i = 0; i < 4; ++i) {
        CHECK(r[0](i, 0) == b(0));
        CHECK(r[1](i, 0) == 0.0);
    }
    CHECK(r[2](0) == 0.0);
}

TEST_CASE("layer_norm with tiny variances and small eps stays accurate", "[fused][invariants]") {
    xg::manual_seed(27);
    for (double eps : {1e-8, 1e-5}) {
        const Array x = randn_array({3, 10}) * 1e-6 + 1.0, g = randn_array({3, 10});
        const auto r = run([eps](auto& t) { return F::layer_norm(t[0], {10}, xg::Tensor(), xg::Tensor(), eps); }, {x}, g);
        double worst = 0, peak = 0;
        for (std::size_t i = 0; i < 3; ++i) {
            const auto [mean, var] = xg::test::exact_moments(10, [&](std::size_t j) { return x(i, j); });
            for (std::size_t j = 0; j < 10; ++j) {
                const long double y = (x(i, j) - mean) / std::sqrt(var + eps);
                worst = std::max(worst, static_cast<double>(std::abs(r[0](i, j) - y)));
                peak = std::max(peak, static_cast<double>(std::abs(y)));
            }
        }
        fmt::print("layer_norm spread 1e-6, eps {:.0e}: max |y - exact| / max |y| = {:.2e}\n", eps, worst / peak);
        CHECK(worst <= 1e-9 * peak);
        CHECK(xg::test::all_finite(r[1]));
    }
}

}  // namespace xg_test_layer_norm_invariants
