// rms_norm's input gradient is orthogonal to x when eps = 0.
#include <cmath>

#include <catch2/catch.hpp>

#include "core/engine/random.hpp"
#include "nn/functional/functional.hpp"
#include "tests/support/norm_kit.hpp"
#include "tests/support/op_runs.hpp"

namespace xg_test_rms_norm_invariants {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using xg::Array;
using xg::test::randn_array;

TEST_CASE("rms_norm input gradient is orthogonal to x when eps = 0", "[fused][invariants]") {
    xg::manual_seed(25);
    const Array x = randn_array({3, 7}), w = randn_array({7}), g = randn_array({3, 7});
    const Array dx = xg::test::run([](auto& t) { return F::rms_norm(t[0], {7}, t[1], 0.0); }, {x, w}, g)[1];
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
