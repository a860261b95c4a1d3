// What batch_norm must satisfy: fused and composed update the running statistics identically,
// and the training gradient sums to zero per channel, orthogonal to x-hat when eps = 0.
#include <cmath>

#include <catch2/catch.hpp>

#include "core/engine/random.hpp"
#include "nn/functional/functional.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/norm_kit.hpp"
#include "tests/support/op_runs.hpp"

namespace xg_test_batch_norm_invariants {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using xg::Array;
using xg::Tensor;
using xg::test::randn_array;

TEST_CASE("batch_norm fused and composed update running statistics identically", "[fused][invariants]") {
    xg::manual_seed(22);
    Tensor x(randn_array({4, 3, 5}));
    Tensor rm1 = xg::zeros({3}), rv1 = xg::ones({3}), rm2 = xg::zeros({3}), rv2 = xg::ones({3});
    F::batch_norm(x, rm1, rv1, Tensor(), Tensor(), true, 0.3);
    F::batch_norm_composed(x, rm2, rv2, Tensor(), Tensor(), true, 0.3);
    CHECK(xg::test::max_rel_diff(rm1.value(), rm2.value()) <= 1e-15);
    CHECK(xg::test::max_rel_diff(rv1.value(), rv2.value()) <= 1e-15);
}

TEST_CASE("batch_norm training gradient sums to zero per channel, orthogonal to x-hat when eps = 0",
          "[fused][invariants]") {
    xg::manual_seed(24);
    const Array x = randn_array({5, 3, 4}) * 2.0 - 1.0, w = randn_array({3}), b = randn_array({3}), g = randn_array({5, 3, 4});
    const Array dx =
        xg::test::run([](auto& t) { return F::batch_norm(t[0], Tensor(), Tensor(), t[1], t[2], true, 0.1, 0.0); }, {x, w, b}, g)[1];
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

}  // namespace xg_test_batch_norm_invariants
