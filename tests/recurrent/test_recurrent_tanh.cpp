// The recurrent kernels' tanh is within 2 ulp of the exact value and keeps its special values.
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/engine/random.hpp"
#include "nn/fast/gate_math.hpp"
#include "nn/fast/kernel_primitives.hpp"
#include "nn/functional/functional.hpp"
#include "tests/support/fixtures.hpp"

namespace xg_test_recurrent_tanh {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using xg::Array;
using xg::Shape;
using xg::Tensor;
using Catch::Matchers::Contains;

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

}  // namespace xg_test_recurrent_tanh
