// `ctest -L float32`: layer_norm and LayerNorm in float32 against float64 (tests/support/float32_nn_twins.hpp).
#include <catch2/catch.hpp>

#include "core/engine/kernel_tier.hpp"

#include "nn/functional/functional.hpp"
#include "nn/modules/norm_layers.hpp"
#include "tests/support/float32_cases.hpp"
#include "tests/support/float32_nn_twins.hpp"
#include "tests/support/norm_tiers.hpp"

namespace xg_test_layer_norm_float32 {

using namespace xg_test_support::nn_twin_names;  // F, Tensor, Inputs, NnTwinList, twin_leaf, module_nn_twin

// The conditions. y = w xhat + b, xhat = (x - mean) rstd. Rounding x by u|x| moves xhat by at most
// u (|x| + mean|x| + |xhat| mean|xhat x|) / sigma ~ 3 kappa u, kappa = sqrt(1 + (mean/sigma)^2) the
// variance's condition (Chan, Golub, LeVeque): |x|/sigma <= kappa + |xhat|. Rounding w, b and y adds
// u each. The gradients dx = w rstd (g - mean g - xhat mean(g xhat)), dw = sum g xhat, db = sum g
// read the same rounded xhat and a rounded seed g (u), and cancel between their three terms by up to
// a factor ~2 (max |dx| is about half its terms' size): 2 (3 kappa + 3) + 1.
NnTwinList layer_norm_twins() {
    const auto ln = [](const Inputs& in) { return Inputs{F::layer_norm(in[0], {32}, in[1], in[2])}; };
    const auto ln_plain = [](const Inputs& in) { return Inputs{F::layer_norm(in[0], {4, 8})}; };
    const auto ln_composed = [](const Inputs& in) { return Inputs{F::layer_norm_composed(in[0], {32}, in[1], in[2])}; };
    const auto affine = [](double shift) {
        return Inputs{twin_leaf({6, 32}, 1, 1.0, shift), twin_leaf({32}, 2, 0.5, 1.0), twin_leaf({32}, 3)};
    };
    const auto module = std::make_shared<xg::nn::LayerNorm>(16);
    return {
        // mean ~ 0, sigma 1: kappa ~ 1 -> 2 (3 + 3) + 1 = 13
        {"layer_norm (6, 32) affine", ln, affine(0.0), 13},
        // mean 100 sigma: kappa ~ 100 -> 2 (300 + 3) + 1 ~ 607; the input's rounding dominates
        {"layer_norm (6, 32) affine, mean 100 sigma", ln, affine(100.0), 607},
        // no affine, two normalized axes: 2 (3 + 1) + 1 = 9
        {"layer_norm (3, 4, 8) no affine", ln_plain, {twin_leaf({3, 4, 8}, 4)}, 9},
        // the composed twin rounds every intermediate (mean, x - mean, var, rstd, ...) too: 6 stores
        // after the input's, each adding u to the relative error of what follows: 13 + 6 = 19
        {"layer_norm_composed (6, 32) affine", ln_composed, affine(0.0), 19},
        // the module: LayerNorm(16) with its weight and bias as inputs: as the first twin, 13
        module_nn_twin("LayerNorm(16) (5, 16)", module, twin_leaf({5, 16}, 5), 13),
    };
}
const xg_test_support::RegisterNnTwins registered("layer_norm", &layer_norm_twins);

TEST_CASE("float32 twin: layer_norm and LayerNorm agree with float64", "[float32][layer_norm]") {
    xg_test_support::run_nn_twins(layer_norm_twins());
}

// The native float32 node (issue 28 part 2, tests/support/float32_cases.hpp): no float64 mirror; the
// float64 arithmetic's bits on the reference tier, the bounds of the fast kernels' float arithmetic
// (FloatArithmeticConditions, norm_tiers.hpp) on the fast tier.
TEST_CASE("float32 layer_norm is a native float32 node: no float64 mirror, the float64 arithmetic's bits or its float bound",
          "[float32][layer_norm]") {
    const auto layer_norm = [](const Inputs& p) { return F::layer_norm(p[0], {4, 33}, p[1], p[2]); };
    const xg::Array x_values = xg_test_support::random_array({6, 4, 33}, 31, 2.0, 0.5);
    const xg::Array w_values = xg_test_support::random_array({4, 33}, 32), b_values = xg_test_support::random_array({4, 33}, 33);
    const xg::Array seed = xg_test_support::random_array({6, 4, 33}, 34);
    xg_test_support::check_native_float32_node_on_tiers(layer_norm, {x_values, w_values, b_values}, seed, [](const auto& run) {
        // 6 rows of 132; dw and db are rounded to float at the end (u more)
        const Tensor &x = run.leaves[0], &w = run.leaves[1], &b = run.leaves[2], &y = run.y;
        const Tensor &x64 = run.route.leaves[0], &w64 = run.route.leaves[1], &b64 = run.route.leaves[2], &y64 = run.route.y;
        using xg_test_support::check_float_arithmetic_agrees;
        using C = xg_test_support::FloatArithmeticConditions;
        const auto k = xg_test_support::float_arithmetic_scales(x64.value(), run.route.g, w64.value(), b64.value(), 6, 132, true, 1e-5);
        check_float_arithmetic_agrees("y", y.values<float>(), xg::to_float32_array(y64.value()), C::ln_y, k.w * (1 + k.s) + k.b, 132);
        check_float_arithmetic_agrees("dx", x.grad_values<float>(), xg::to_float32_array(x64.grad_value()), C::ln_dx,
                                      k.rstd * k.G * (1 + k.s) * (1 + k.s), 132);
        check_float_arithmetic_agrees("dw", w.grad_values<float>(), xg::to_float32_array(w64.grad_value()), C::ln_dw + 1,
                                      (1 + k.s) * k.g_column, 132);
        check_float_arithmetic_agrees("db", b.grad_values<float>(), xg::to_float32_array(b64.grad_value()), C::ln_db + 1, k.g_column,
                                      132);
    });
}

// Rows of two values (and one): dx is the eps term alone, which float arithmetic cannot resolve
// (nn/fast/layer_norm.cpp, kWidestRowInDouble), so the fast kernels compute such rows in double:
// the float64 route's bits, as on the reference tier.
TEST_CASE("float32 layer_norm over one or two values: the fast kernels give the float64 arithmetic's bits", "[float32][layer_norm]") {
    const xg::KernelTierGuard tier(xg::KernelTier::fast);
    for (std::size_t D : {1, 2}) {
        const auto layer_norm = [D](const Inputs& p) { return F::layer_norm(p[0], {D}, p[1], p[2]); };
        const Tensor x = Tensor(xg_test_support::random_array({7, D}, 41, 2.0, 0.5), xg::kFloat32, true);
        const Tensor w = Tensor(xg_test_support::random_array({D}, 42), xg::kFloat32, true);
        const Tensor b = Tensor(xg_test_support::random_array({D}, 43), xg::kFloat32, true);
        const Tensor g = Tensor(xg_test_support::random_array({7, D}, 44), xg::kFloat32);
        const Tensor y = layer_norm({x, w, b});
        y.backward(g);
        xg_test_support::check_float64_route_bits(y, {x, w, b}, xg_test_support::float64_route(layer_norm, {x, w, b}, g));
    }
}

TEST_CASE("layer_norm with float32 x and a float64 weight keeps the float64 route", "[float32][layer_norm]") {
    const Tensor x = Tensor(xg_test_support::random_array({3, 8}, 35), xg::kFloat32, true);
    const Tensor w(xg_test_support::random_array({8}, 36), true);
    xg_test_support::check_mixed_dtypes_keep_float64_route([](const Inputs& p) { return F::layer_norm(p[0], {8}, p[1], Tensor()); },
                                                           {x, w});
}

}  // namespace xg_test_layer_norm_float32
