// rms_norm of all-zero rows: zero output, finite gradients.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/engine/random.hpp"
#include "core/ops/ops.hpp"
#include "nn/nn.hpp"
#include "tests/support/op_runs.hpp"

namespace xg_test_rms_norm_robustness {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using xg::Array;
using xg::Shape;
using xg::Tensor;

namespace {

using Fn = xg::test::OpOfLeaves;
using xg::test::all_finite;
using xg::test::run;

Array randn(const Shape& s) { return xg::randn(s).value(); }

}  // namespace

TEST_CASE("rms_norm of all-zero rows is zero with finite gradients", "[robustness]") {
    for (bool composed : {false, true}) {
        const auto rms = composed ? F::rms_norm_composed : F::rms_norm;
        const auto r = run([&](auto& t) { return rms(t[0], {6}, t[1], 1e-6); }, {xt::zeros<double>({2, 6}), randn({6})},
                           randn({2, 6}));
        CHECK(std::all_of(r[0].begin(), r[0].end(), [](double v) { return v == 0.0; }));
        CHECK(all_finite(r));
    }
}

}  // namespace xg_test_rms_norm_robustness
