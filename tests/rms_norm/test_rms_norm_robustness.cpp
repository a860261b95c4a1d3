// rms_norm of all-zero rows: zero output, finite gradients.
#include <algorithm>

#include <catch2/catch.hpp>

#include "nn/functional/functional.hpp"
#include "tests/support/norm_kit.hpp"
#include "tests/support/op_runs.hpp"

namespace xg_test_rms_norm_robustness {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;

TEST_CASE("rms_norm of all-zero rows is zero with finite gradients", "[robustness]") {
    for (bool composed : {false, true}) {
        const auto rms = composed ? F::rms_norm_composed : F::rms_norm;
        const auto r = xg::test::run([&](auto& t) { return rms(t[0], {6}, t[1], 1e-6); },
                                     {xt::zeros<double>({2, 6}), xg::test::randn_array({6})}, xg::test::randn_array({2, 6}));
        CHECK(std::all_of(r[0].begin(), r[0].end(), [](double v) { return v == 0.0; }));
        CHECK(xg::test::all_finite(r));
    }
}

}  // namespace xg_test_rms_norm_robustness
