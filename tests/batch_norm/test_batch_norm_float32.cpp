// `ctest -L float32`: batch_norm, BatchNorm1d and BatchNorm2d in float32 against float64
// (tests/support/float32_nn_twins.hpp), and the running statistics of a float32 BatchNorm staying float32.
#include <memory>

#include <catch2/catch.hpp>

#include "nn/functional/functional.hpp"
#include "nn/modules/image_norm.hpp"
#include "nn/modules/norm_layers.hpp"
#include "tests/support/float32_cases.hpp"
#include "tests/support/float32_nn_twins.hpp"
#include "tests/support/norm_tiers.hpp"

namespace xg_test_batch_norm_float32 {

using namespace xg_test_support::nn_twin_names;  // F, Tensor, Inputs, NnTwinList, twin_leaf, module_nn_twin

// The conditions: LayerNorm's (tests/layer_norm/test_layer_norm_float32.cpp) with the statistics taken
// per channel over N and the trailing axes instead of per row: y = w xhat + b moves by 3 kappa u from
// the input's rounding (kappa = sqrt(1 + (mean/sigma)^2) ~ 1 here), u each from w, b and y; the
// gradients cancel by up to ~2 and read a rounded seed: 2 (3 + 3) + 1 = 13.
NnTwinList batch_norm_twins() {
    // training: batch statistics, and the running statistics (float32 copies too) updated in place
    const auto train = [](const Inputs& in) { return Inputs{F::batch_norm(in[0], in[3], in[4], in[1], in[2], true)}; };
    const auto train_composed = [](const Inputs& in) {
        return Inputs{F::batch_norm_composed(in[0], in[3], in[4], in[1], in[2], true)};
    };
    // evaluation: the running statistics are constants, y = w (x - rm) / sqrt(rv + eps) + b: rounding x,
    // rm, rv (half its u through the root), w, b and y: 6 u; the gradient reads them and g: 13 still
    const auto eval = [](const Inputs& in) { return Inputs{F::batch_norm(in[0], in[3], in[4], in[1], in[2], false)}; };
    const auto inputs = [](const xg::Shape& shape) {
        const std::size_t c = shape[1];
        return Inputs{twin_leaf(shape, 21), twin_leaf({c}, 22, 0.5, 1.0), twin_leaf({c}, 23),
                      twin_leaf({c}, 24, 0.1, 0.0, false), twin_leaf({c}, 25, 0.1, 1.0, false)};
    };
    const auto bn1d = std::make_shared<xg::nn::BatchNorm1d>(5);
    const auto bn2d = std::make_shared<xg::nn::BatchNorm2d>(3);
    const auto bn2d_eval = std::make_shared<xg::nn::BatchNorm2d>(3);
    bn2d_eval->running_mean.mutable_value() = twin_leaf({3}, 26, 0.1).value();
    bn2d_eval->eval();
    return {
        {"batch_norm (8, 5) training", train, inputs({8, 5}), 13},
        {"batch_norm (4, 3, 6) training", train, inputs({4, 3, 6}), 13},
        {"batch_norm (4, 3, 6) evaluation", eval, inputs({4, 3, 6}), 13},
        // the composed twin rounds mean, x - mean, var, + eps, sqrt, the quotient, * w: 7 more, 20
        {"batch_norm_composed (4, 3, 6) training", train_composed, inputs({4, 3, 6}), 20},
        module_nn_twin("BatchNorm1d(5) (6, 5, 3) training", bn1d, twin_leaf({6, 5, 3}, 27), 13),
        module_nn_twin("BatchNorm2d(3) (2, 3, 4, 4) training", bn2d, twin_leaf({2, 3, 4, 4}, 28), 13),
        module_nn_twin("BatchNorm2d(3) (2, 3, 4, 4) evaluation", bn2d_eval, twin_leaf({2, 3, 4, 4}, 29), 13),
    };
}
const xg_test_support::RegisterNnTwins registered("batch_norm", &batch_norm_twins);

TEST_CASE("float32 twin: batch_norm, BatchNorm1d and BatchNorm2d agree with float64", "[float32][batch_norm]") {
    xg_test_support::run_nn_twins(batch_norm_twins());
}

TEST_CASE("float32: BatchNorm's running statistics stay float32 after training steps", "[float32][batch_norm]") {
    for (const bool cumulative : {false, true}) {
        xg::nn::BatchNorm2d bn64(3, 1e-5, cumulative ? std::nullopt : std::optional<double>(0.1));
        xg::nn::BatchNorm2d bn32(3, 1e-5, cumulative ? std::nullopt : std::optional<double>(0.1));
        bn32.to(xg::kFloat32);
        for (std::uint64_t step = 0; step < 3; ++step) {
            const Tensor x = twin_leaf({4, 3, 2, 2}, 30 + step, 2.0, 1.0);
            xg::sum(bn64(x)).backward();
            xg::sum(bn32(x.to(xg::kFloat32))).backward();
        }
        INFO((cumulative ? "cumulative average" : "momentum 0.1"));
        for (const Tensor& t : {bn32.running_mean, bn32.running_var, Tensor(bn32.weight), Tensor(bn32.bias)}) {
            CHECK(t.dtype() == xg::kFloat32);
            // on the float32 grid: the in-place update of the running statistics was rounded
            CHECK(xt::all(xt::equal(xt::cast<double>(xt::cast<float>(t.value())), t.value())));
        }
        CHECK(bn32.weight.grad().dtype() == xg::kFloat32);
        CHECK(bn32.num_batches_tracked.value()() == 3.0);
        // running_mean: a momentum average of batch means, each rounded once to float32 and rounded
        // again at every store: 3 steps of 2 roundings, 6 u of the largest mean plus the input's u: 7 u
        const double u = xg::unit_roundoff(xg::kFloat32);
        for (const auto& [a32, a64] : {std::pair{bn32.running_mean.value(), bn64.running_mean.value()},
                                       std::pair{bn32.running_var.value(), bn64.running_var.value()}}) {
            const double scale = xt::amax(xt::abs(a64))();
            CHECK(xt::amax(xt::abs(a32 - a64))() <= 7 * u * scale);
        }
        // evaluation mode now reads float32 running statistics: the output is float32
        bn32.eval();
        CHECK(bn32(twin_leaf({2, 3, 2, 2}, 40).to(xg::kFloat32)).dtype() == xg::kFloat32);
    }
}

// The native float32 node (tests/support/float32_cases.hpp): x, weight, bias, y and the seed get no
// float64 mirror, forward or backward. The bound: none, bit for bit on both tiers. Both tiers' float
// kernels widen every float32 value they read and run the double kernels' arithmetic, in the same
// order (the fast tier's shift block is counted in doubles whatever the storage), and round y and dx
// once at their store, dw and db once at the end; the float64 route computes the same doubles from
// the same values, and its results rounded once are those bits.
TEST_CASE("float32 batch_norm is a native float32 node: no float64 mirror, the float64 arithmetic's bits on both tiers",
          "[float32][batch_norm]") {
    // the running statistics on the float32 grid, in x's dtype (a float32 module keeps them float32)
    const xg::Array running_mean = xg::to_float64_array(xg::to_float32_array(xg_test_support::random_array({4}, 50, 0.1)));
    const xg::Array running_var =
        xg::to_float64_array(xg::to_float32_array(xg::Array(xt::abs(xg_test_support::random_array({4}, 51)) + 0.5)));
    for (const xg::Shape& shape : {xg::Shape{9, 4}, xg::Shape{5, 4, 7}}) {
        for (const bool training : {true, false}) {
            for (const bool affine : {true, false}) {
                INFO(xg::shape_str(shape) << (training ? " training" : " evaluation") << (affine ? ", affine" : ", no affine"));
                const auto batch_norm = [&](const Inputs& p) {
                    const Tensor rm(running_mean, p[0].dtype()), rv(running_var, p[0].dtype());
                    return F::batch_norm(p[0], rm, rv, affine ? p[1] : Tensor(), affine ? p[2] : Tensor(), training, 0.1);
                };
                std::vector<xg::Array> leaves{xg_test_support::random_array(shape, 52, 2.0, 0.5)};
                if (affine) leaves.insert(leaves.end(), {xg_test_support::random_array({4}, 53), xg_test_support::random_array({4}, 54)});
                xg_test_support::check_native_float32_node_on_tiers(
                    batch_norm, leaves, xg_test_support::random_array(shape, 55),
                    [](const auto& run) { xg_test_support::check_float64_route_bits(run.y, run.leaves, run.route); });
            }
        }
    }
}

TEST_CASE("batch_norm with float32 x and a float64 weight keeps the float64 route", "[float32][batch_norm]") {
    const Tensor x = Tensor(xg_test_support::random_array({6, 4}, 56), xg::kFloat32, true);
    const Tensor w(xg_test_support::random_array({4}, 57), true);
    xg_test_support::check_mixed_dtypes_keep_float64_route(
        [](const Inputs& p) { return F::batch_norm(p[0], Tensor(), Tensor(), p[1], Tensor(), true); }, {x, w});
}

// Issue 41, item 1: a float32 BatchNorm reads and updates its running statistics in their float32
// storage (no float64 mirror), with the float64 update's arithmetic rounded once per stored value.
// The float64 module starts every step from the float32 module's statistics, widened, so that each
// step is compared on its own, to the bit.
TEST_CASE("float32 BatchNorm1d: running statistics without a float64 mirror, the float64 update rounded once",
          "[float32][batch_norm]") {
    const auto no_mirror = [](const Tensor& t) {
        return t.node()->value_mirror == xg::Node::Mirror::None && t.node()->grad_mirror == xg::Node::Mirror::None;
    };
    const auto widen_into = [](const xg::nn::BatchNorm1d& from, xg::nn::BatchNorm1d& to) {
        to.running_mean.mutable_value() = xg::to_float64_array(from.running_mean.values<float>());
        to.running_var.mutable_value() = xg::to_float64_array(from.running_var.values<float>());
    };
    for (const bool cumulative : {false, true}) {
        INFO((cumulative ? "cumulative average" : "momentum 0.1"));
        const std::optional<double> momentum = cumulative ? std::nullopt : std::optional<double>(0.1);
        xg::nn::BatchNorm1d bn64(4, 1e-5, momentum), bn32(4, 1e-5, momentum);
        bn32.to(xg::kFloat32);
        for (std::uint64_t step = 0; step < 3; ++step) {
            INFO("training step " << step);
            widen_into(bn32, bn64);
            const Tensor x = twin_leaf({6, 4, 3}, 60 + step, 2.0, 1.0).to(xg::kFloat32);
            bn64(x.to(xg::kFloat64));
            bn32(x);
            for (const auto& [t32, t64] : {std::pair{bn32.running_mean, bn64.running_mean}, std::pair{bn32.running_var, bn64.running_var}}) {
                CHECK(t32.dtype() == xg::kFloat32);
                CHECK(no_mirror(t32));
                CHECK(xt::all(xt::equal(t32.values<float>(), xg::to_float32_array(t64.value()))));
            }
        }
        // evaluation reads them from the float32 storage too, and leaves them as they are
        bn32.eval();
        bn64.eval();
        widen_into(bn32, bn64);
        const xg::FloatArray mean_before = bn32.running_mean.values<float>(), var_before = bn32.running_var.values<float>();
        const Tensor x = twin_leaf({5, 4, 3}, 70, 2.0, 1.0).to(xg::kFloat32);
        const Tensor y32 = bn32(x), y64 = bn64(x.to(xg::kFloat64));
        CHECK(no_mirror(bn32.running_mean));
        CHECK(no_mirror(bn32.running_var));
        CHECK(xt::all(xt::equal(bn32.running_mean.values<float>(), mean_before)));
        CHECK(xt::all(xt::equal(bn32.running_var.values<float>(), var_before)));
        CHECK(xt::all(xt::equal(y32.values<float>(), xg::to_float32_array(y64.value()))));
    }
}

}  // namespace xg_test_batch_norm_float32
