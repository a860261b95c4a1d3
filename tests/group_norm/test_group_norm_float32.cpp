// `ctest -L float32`: group_norm, instance_norm, GroupNorm and InstanceNorm2d in float32 against
// float64 (tests/support/float32_nn_twins.hpp).
#include <memory>

#include <catch2/catch.hpp>

#include "nn/functional/functional.hpp"
#include "nn/modules/image_norm.hpp"
#include "tests/support/float32_cases.hpp"
#include "tests/support/float32_nn_twins.hpp"
#include "tests/support/norm_tiers.hpp"  // random_array

namespace xg_test_group_norm_float32 {

using namespace xg_test_support::nn_twin_names;  // F, Tensor, Inputs, NnTwinList, twin_leaf, module_nn_twin

// The conditions: LayerNorm's (tests/layer_norm/test_layer_norm_float32.cpp) over each sample's group
// of channels: the input's rounding moves xhat by 3 kappa u (kappa ~ 1 for these zero-mean inputs),
// w, b and y add u each; the gradients cancel by up to ~2 and read a rounded seed: 2 (3 + 3) + 1 = 13.
NnTwinList group_norm_twins() {
    const auto gn = [](const Inputs& in) { return Inputs{F::group_norm(in[0], 2, in[1], in[2])}; };
    const auto gn_composed = [](const Inputs& in) { return Inputs{F::group_norm_composed(in[0], 2, in[1], in[2])}; };
    // instance_norm with running statistics (float32 copies when the input is): updated in place
    const auto in_norm = [](const Inputs& in) { return Inputs{F::instance_norm(in[0], in[3], in[4], in[1], in[2])}; };
    const auto in_norm_composed = [](const Inputs& in) {
        return Inputs{F::instance_norm_composed(in[0], in[3], in[4], in[1], in[2])};
    };
    // use_input_stats = false: batch_norm's evaluation with the running statistics (13)
    const auto in_norm_eval = [](const Inputs& in) {
        return Inputs{F::instance_norm(in[0], in[3], in[4], in[1], in[2], false)};
    };
    const Inputs inputs{twin_leaf({2, 4, 3, 3}, 31), twin_leaf({4}, 32, 0.5, 1.0), twin_leaf({4}, 33),
                        twin_leaf({4}, 34, 0.1, 0.0, false), twin_leaf({4}, 35, 0.1, 1.0, false)};
    const auto gn_module = std::make_shared<xg::nn::GroupNorm>(2, 4);
    const auto in_module = std::make_shared<xg::nn::InstanceNorm2d>(4, 1e-5, 0.1, true, true);
    return {
        {"group_norm (2, 4, 3, 3) 2 groups", gn, {inputs[0], inputs[1], inputs[2]}, 13},
        // the composed twin rounds its 7 intermediates (reshape, mean, x - mean, var, + eps, sqrt, /): 20
        {"group_norm_composed (2, 4, 3, 3) 2 groups", gn_composed, {inputs[0], inputs[1], inputs[2]}, 20},
        {"instance_norm (2, 4, 3, 3) running stats", in_norm, inputs, 13},
        {"instance_norm_composed (2, 4, 3, 3) running stats", in_norm_composed, inputs, 20},
        {"instance_norm (2, 4, 3, 3) running stats, use_input_stats false", in_norm_eval, inputs, 13},
        module_nn_twin("GroupNorm(2, 4) (3, 4, 5)", gn_module, twin_leaf({3, 4, 5}, 36), 13),
        module_nn_twin("InstanceNorm2d(4, affine, running stats) (2, 4, 3, 3)", in_module, twin_leaf({2, 4, 3, 3}, 37), 13),
    };
}
const xg_test_support::RegisterNnTwins registered("group_norm", &group_norm_twins);

TEST_CASE("float32 twin: group_norm, instance_norm, GroupNorm and InstanceNorm2d agree with float64", "[float32][group_norm]") {
    xg_test_support::run_nn_twins(group_norm_twins());
}

// The native float32 node (tests/support/float32_cases.hpp): x, weight, bias, y and the seed get no
// float64 mirror, forward or backward. The bound: none, bit for bit on both tiers. Both tiers'
// kernels widen every float32 value they read, run the double arithmetic of the float64 kernels in
// the same order, and round y and dx once at their store, dw and db once at the end; the float64
// route computes the same doubles from the same values, and its results rounded once are those bits.
TEST_CASE("float32 group_norm and instance_norm are native float32 nodes: no float64 mirror, the float64 arithmetic's bits "
          "on both tiers",
          "[float32][group_norm]") {
    for (const bool affine : {true, false}) {
        INFO((affine ? "affine" : "no affine"));
        std::vector<xg::Array> leaves{xg_test_support::random_array({3, 4, 5}, 70, 2.0, 0.5)};
        if (affine) leaves.insert(leaves.end(), {xg_test_support::random_array({4}, 71), xg_test_support::random_array({4}, 72)});
        const auto group_norm = [affine](const Inputs& p) { return F::group_norm(p[0], 2, affine ? p[1] : Tensor(), affine ? p[2] : Tensor()); };
        const auto instance_norm = [affine](const Inputs& p) {
            return F::instance_norm(p[0], Tensor(), Tensor(), affine ? p[1] : Tensor(), affine ? p[2] : Tensor());
        };
        for (const auto& op : {xg_test_support::Float32NodeOp(group_norm), xg_test_support::Float32NodeOp(instance_norm)}) {
            xg_test_support::check_native_float32_node_on_tiers(
                op, leaves, xg_test_support::random_array({3, 4, 5}, 73),
                [](const auto& run) { xg_test_support::check_float64_route_bits(run.y, run.leaves, run.route); });
        }
    }
}

TEST_CASE("group_norm with float32 x and a float64 weight keeps the float64 route", "[float32][group_norm]") {
    const Tensor x = Tensor(xg_test_support::random_array({2, 4, 3}, 74), xg::kFloat32, true);
    const Tensor w(xg_test_support::random_array({4}, 75), true);
    xg_test_support::check_mixed_dtypes_keep_float64_route([](const Inputs& p) { return F::group_norm(p[0], 2, p[1]); }, {x, w});
}

}  // namespace xg_test_group_norm_float32
