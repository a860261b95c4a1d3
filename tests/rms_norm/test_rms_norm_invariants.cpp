// rms_norm's input gradient is orthogonal to x when eps = 0.
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
#include "tests/support/op_runs.hpp"

namespace xg_test_rms_norm_invariants {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using xg::Array;
using xg::Shape;
using xg::Tensor;
using Catch::Matchers::Contains;

namespace {

using Fn = xg::test::OpOfLeaves;
using xg::test::all_finite;
using xg::test::run;

Array randn(const Shape& s) { return xg::randn(s).value(); }

}  // namespace

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

}  // namespace xg_test_rms_norm_invariants
