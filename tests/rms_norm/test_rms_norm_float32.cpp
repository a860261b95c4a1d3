// `ctest -L float32`: rms_norm and RMSNorm in float32 against float64 (tests/support/float32_nn_twins.hpp).
#include <memory>

#include <catch2/catch.hpp>

#include "core/engine/kernel_tier.hpp"

#include "nn/functional/functional.hpp"
#include "nn/modules/norm_layers.hpp"
#include "tests/support/float32_cases.hpp"
#include "tests/support/float32_nn_twins.hpp"
#include "tests/support/norm_tiers.hpp"

namespace xg_test_rms_norm_float32 {

using namespace xg_test_support::nn_twin_names;  // F, Tensor, Inputs, NnTwinList, twin_leaf, module_nn_twin

// The conditions. y = w x rstd, rstd = 1 / sqrt(mean(x^2) + eps): no mean is subtracted, so nothing
// cancels in the forward: rounding x by u|x| moves x rstd by at most u |xhat| (1 + mean(xhat^2)) ~ 2u
// relative; rounding w and y adds u each: 4. The gradient dx = w rstd (g - xhat mean(g xhat)) reads a
// rounded seed g (u) and cancels between its two terms by up to a factor ~2: 2 * 4 + 1 = 9.
NnTwinList rms_norm_twins() {
    const auto rms = [](const Inputs& in) { return Inputs{F::rms_norm(in[0], {24}, in[1])}; };
    const auto rms_composed = [](const Inputs& in) { return Inputs{F::rms_norm_composed(in[0], {24}, in[1])}; };
    const auto plain = [](const Inputs& in) { return Inputs{F::rms_norm(in[0], {3, 8})}; };
    const auto module = std::make_shared<xg::nn::RMSNorm>(12);
    return {
        {"rms_norm (7, 24) weight", rms, {twin_leaf({7, 24}, 11), twin_leaf({24}, 12, 0.5, 1.0)}, 9},
        // a large common offset does not hurt RMSNorm (it is part of the rms): 9 still
        {"rms_norm (7, 24) weight, mean 1000", rms, {twin_leaf({7, 24}, 11, 1.0, 1000.0), twin_leaf({24}, 12, 0.5, 1.0)}, 9},
        // no weight, two normalized axes: 2 (3) + 1 = 7
        {"rms_norm (2, 3, 8) no weight", plain, {twin_leaf({2, 3, 8}, 13)}, 7},
        // the composed twin rounds x^2, its mean, + eps, sqrt, the quotient: 5 stores more, 9 + 5 = 14
        {"rms_norm_composed (7, 24) weight", rms_composed, {twin_leaf({7, 24}, 11), twin_leaf({24}, 12, 0.5, 1.0)}, 14},
        // RMSNorm(12) with its weight as an input: as the first twin, 9
        module_nn_twin("RMSNorm(12) (4, 12)", module, twin_leaf({4, 12}, 14), 9),
    };
}
const xg_test_support::RegisterNnTwins registered("rms_norm", &rms_norm_twins);

TEST_CASE("float32 twin: rms_norm and RMSNorm agree with float64", "[float32][rms_norm]") {
    xg_test_support::run_nn_twins(rms_norm_twins());
}

// The native float32 node (issue 28 part 2, tests/support/float32_cases.hpp): no float64 mirror; the
// float64 arithmetic's bits on the reference tier, the bounds of the fast kernels' float arithmetic
// (FloatArithmeticConditions, norm_tiers.hpp) on the fast tier.
TEST_CASE("float32 rms_norm is a native float32 node: no float64 mirror, the float64 arithmetic's bits or its float bound",
          "[float32][rms_norm]") {
    const auto rms_norm = [](const Inputs& p) { return F::rms_norm(p[0], {4, 33}, p[1]); };
    const xg::Array x_values = xg_test_support::random_array({6, 4, 33}, 31, 2.0, 0.5);
    const xg::Array w_values = xg_test_support::random_array({4, 33}, 32);
    const xg::Array seed = xg_test_support::random_array({6, 4, 33}, 34);
    xg_test_support::check_native_float32_node_on_tiers(rms_norm, {x_values, w_values}, seed, [](const auto& run) {
        // 6 rows of 132; dw is rounded to float at the end (u more)
        const Tensor &x = run.leaves[0], &w = run.leaves[1], &y = run.y;
        const Tensor &x64 = run.route.leaves[0], &w64 = run.route.leaves[1], &y64 = run.route.y;
        using xg_test_support::check_float_arithmetic_agrees;
        using C = xg_test_support::FloatArithmeticConditions;
        const auto k = xg_test_support::float_arithmetic_scales(x64.value(), run.route.g, w64.value(), xg::Array(), 6, 132, false, 1e-6);
        check_float_arithmetic_agrees("y", y.values<float>(), xg::to_float32_array(y64.value()), C::rms_y, k.w * k.s, 132);
        check_float_arithmetic_agrees("dx", x.grad_values<float>(), xg::to_float32_array(x64.grad_value()), C::rms_dx,
                                      k.rstd * k.G * (1 + k.s * k.s), 132);
        check_float_arithmetic_agrees("dw", w.grad_values<float>(), xg::to_float32_array(w64.grad_value()), C::rms_dw + 1,
                                      k.s * k.g_column, 132);
    });
}

// Rows of one value: dx is the eps term alone, which float arithmetic cannot resolve
// (nn/fast/rms_norm.cpp), so the fast kernels compute such rows in double: the float64 route's
// bits, as on the reference tier.
TEST_CASE("float32 rms_norm over one value: the fast kernels give the float64 arithmetic's bits", "[float32][rms_norm]") {
    const xg::KernelTierGuard tier(xg::KernelTier::fast);
    const auto rms_norm = [](const Inputs& p) { return F::rms_norm(p[0], {1}, p[1]); };
    const Tensor x = Tensor(xg_test_support::random_array({7, 1}, 41, 2.0, 0.5), xg::kFloat32, true);
    const Tensor w = Tensor(xg_test_support::random_array({1}, 42), xg::kFloat32, true);
    const Tensor g = Tensor(xg_test_support::random_array({7, 1}, 44), xg::kFloat32);
    const Tensor y = rms_norm({x, w});
    y.backward(g);
    xg_test_support::check_float64_route_bits(y, {x, w}, xg_test_support::float64_route(rms_norm, {x, w}, g));
}

TEST_CASE("rms_norm with float32 x and a float64 weight keeps the float64 route", "[float32][rms_norm]") {
    const Tensor x = Tensor(xg_test_support::random_array({3, 8}, 35), xg::kFloat32, true);
    const Tensor w(xg_test_support::random_array({8}, 36), true);
    xg_test_support::check_mixed_dtypes_keep_float64_route([](const Inputs& p) { return F::rms_norm(p[0], {8}, p[1]); }, {x, w});
}

}  // namespace xg_test_rms_norm_float32
