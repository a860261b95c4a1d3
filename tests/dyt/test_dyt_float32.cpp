// `ctest -L float32`: dyt and DyT in float32 against float64 (tests/support/float32_nn_twins.hpp).
#include <memory>

#include <catch2/catch.hpp>

#include "nn/functional/functional.hpp"
#include "nn/modules/dyt.hpp"
#include "tests/support/float32_cases.hpp"
#include "tests/support/float32_nn_twins.hpp"
#include "tests/support/norm_tiers.hpp"  // random_array

namespace xg_test_dyt_float32 {

using namespace xg_test_support::nn_twin_names;  // F, Tensor, Inputs, NnTwinList, twin_leaf, module_nn_twin

// The conditions. y = w tanh(alpha x) + b: rounding x and alpha moves alpha x by 2u |alpha x|, and
// tanh by sech^2(z) 2u |z| <= 0.9 u (z sech^2 z <= 0.45); w, b and y add u each: 4. The gradients
// dx = g w alpha sech^2, dalpha = sum g w x sech^2, dw = sum g tanh, db = sum g read a rounded seed
// (u) and w, alpha, x (u each), and sech^2 moves by 2 |tanh| sech^2 2u |z| <= 1.6 u: with the sums'
// cancellation (up to ~2 for random-sign g): 2 (1 + 3 + 1.6) + 1 = 12.
NnTwinList dyt_twins() {
    const auto dyt = [](const Inputs& in) { return Inputs{F::dyt(in[0], {16}, in[1], in[2], in[3])}; };
    const auto dyt_composed = [](const Inputs& in) { return Inputs{F::dyt_composed(in[0], {16}, in[1], in[2], in[3])}; };
    const auto dyt_plain = [](const Inputs& in) { return Inputs{F::dyt(in[0], {2, 8}, in[1])}; };
    const Inputs inputs{twin_leaf({6, 16}, 51, 2.0), twin_leaf({1}, 52, 0.1, 0.5), twin_leaf({16}, 53, 0.5, 1.0),
                        twin_leaf({16}, 54)};
    const auto module = std::make_shared<xg::nn::DyT>(8);
    return {
        {"dyt (6, 16) weight and bias", dyt, inputs, 12},
        {"dyt (3, 2, 8) no weight or bias", dyt_plain, {twin_leaf({3, 2, 8}, 55, 2.0), twin_leaf({1}, 52, 0.1, 0.5)}, 12},
        // the composed twin rounds alpha x, tanh and w tanh too: 3 more, 15
        {"dyt_composed (6, 16) weight and bias", dyt_composed, inputs, 15},
        module_nn_twin("DyT(8) (4, 8)", module, twin_leaf({4, 8}, 56, 2.0), 12),
    };
}
const xg_test_support::RegisterNnTwins registered("dyt", &dyt_twins);

TEST_CASE("float32 twin: dyt and DyT agree with float64", "[float32][dyt]") { xg_test_support::run_nn_twins(dyt_twins()); }

// The native float32 node (tests/support/float32_cases.hpp): x, alpha, weight, bias, y and the seed
// get no float64 mirror, forward or backward. The bound: none, bit for bit on both tiers. Both tiers'
// kernels widen every float32 value they read, run the double arithmetic of the float64 kernels in
// the same order, and round y, dx and dalpha once at their store, dw and db once at the end; the
// float64 route computes the same doubles from the same values, and its results rounded once are
// those bits.
TEST_CASE("float32 dyt is a native float32 node: no float64 mirror, the float64 arithmetic's bits on both tiers",
          "[float32][dyt]") {
    for (const bool affine : {true, false}) {
        INFO((affine ? "weight and bias" : "no weight or bias"));
        const auto dyt = [affine](const Inputs& p) { return F::dyt(p[0], {8}, p[1], affine ? p[2] : Tensor(), affine ? p[3] : Tensor()); };
        std::vector<xg::Array> leaves{xg_test_support::random_array({5, 8}, 60, 2.0), xg::Array({0.7})};
        if (affine) leaves.insert(leaves.end(), {xg_test_support::random_array({8}, 61), xg_test_support::random_array({8}, 62)});
        xg_test_support::check_native_float32_node_on_tiers(
            dyt, leaves, xg_test_support::random_array({5, 8}, 63),
            [](const auto& run) { xg_test_support::check_float64_route_bits(run.y, run.leaves, run.route); });
    }
}

TEST_CASE("dyt with float32 x and a float64 alpha keeps the float64 route", "[float32][dyt]") {
    const Tensor x = Tensor(xg_test_support::random_array({4, 8}, 64), xg::kFloat32, true);
    const Tensor alpha(xg::Array({0.5}), true);
    xg_test_support::check_mixed_dtypes_keep_float64_route([](const Inputs& p) { return F::dyt(p[0], {8}, p[1]); }, {x, alpha});
}

}  // namespace xg_test_dyt_float32
