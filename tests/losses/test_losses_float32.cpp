// `ctest -L float32`: cross_entropy, mse_loss and their modules in float32 against float64
// (tests/support/float32_nn_twins.hpp).
#include <memory>

#include <catch2/catch.hpp>

#include "nn/functional/functional.hpp"
#include "nn/modules/losses.hpp"
#include "tests/support/float32_nn_twins.hpp"

namespace xg_test_losses_float32 {

using namespace xg_test_support::nn_twin_names;  // Tensor, Inputs, NnTwinList, twin_leaf, module_nn_twin
using xg::nn::CrossEntropyFuncOptions;
using xg::nn::Reduction;

// cross_entropy = mean (logsumexp z - z_t): rounding the logits (|z| <= ~2.5 for 1.2 N(0, 1)) moves
// each row's loss by at most 2u max |z| = 5u, against a loss of ~log C = 1.6 or more: 3.1, with the
// result's rounding 4. The gradient (softmax(z) - onehot) / N moves by p (dz - sum p dz), 2u max |z|
// relative = 5, and reads a rounded seed and is rounded: 7. Class weights and smoothing are rounded
// constants that scale the rows (u more): 8.
constexpr double kCrossEntropyCondition = 8;
// mse = mean (x - t)^2: rounding x and t moves it by 2 mean |x - t| u (|x| + |t|) against
// mean (x - t)^2: ~2.3u for independent N(0, 1) inputs, with the result's rounding 3.3; the gradient
// 2 (x - t) / n: u (max |x| + max |t|) / max |x - t| ~ 1.5u, with the seed and the result 3.5: so 4.
constexpr double kMseCondition = 4;

NnTwinList losses_twins() {
    const xg::IndexArray targets{0, 3, 4, 1, 3, 2};
    const xg::IndexArray targets_ignored{0, -100, 4, 1, 3, -100};
    const xg::IndexArray targets_nd{{0, 2, 1}, {2, 2, 0}};
    const Tensor logits = twin_leaf({6, 5}, 81, 1.2);
    const Tensor class_weights = twin_leaf({5}, 82, 0.2, 1.0, false);
    const auto module = std::make_shared<xg::nn::CrossEntropyLoss>(CrossEntropyFuncOptions().label_smoothing(0.1));
    const auto mse_module = std::make_shared<xg::nn::MSELoss>(Reduction::sum);
    return {
        {"cross_entropy (6, 5) mean", [targets](const Inputs& in) { return Inputs{xg::nn::cross_entropy(in[0], targets)}; },
         {logits}, kCrossEntropyCondition},
        {"cross_entropy (6, 5) none, ignored rows",
         [targets_ignored](const Inputs& in) { return Inputs{xg::nn::cross_entropy(in[0], targets_ignored, Reduction::none)}; },
         {logits}, kCrossEntropyCondition},
        {"cross_entropy (6, 5) sum, label smoothing 0.2",
         [targets](const Inputs& in) { return Inputs{xg::nn::cross_entropy(in[0], targets, Reduction::sum, 0.2)}; }, {logits},
         kCrossEntropyCondition},
        // class weights: a float32 weight tensor in the float32 run (the inputs' dtype)
        {"cross_entropy (6, 5) class weights, smoothing 0.1, ignore_index 3",
         [targets](const Inputs& in) {
             return Inputs{xg::nn::cross_entropy(in[0], targets,
                                                 CrossEntropyFuncOptions().weight(in[1]).label_smoothing(0.1).ignore_index(3))};
         },
         {logits, class_weights}, kCrossEntropyCondition},
        {"cross_entropy (2, 3, 3) classes on axis 1",
         [targets_nd](const Inputs& in) { return Inputs{xg::nn::cross_entropy(in[0], targets_nd)}; },
         {twin_leaf({2, 3, 3}, 83, 1.2)}, kCrossEntropyCondition},
        module_nn_twin("CrossEntropyLoss(label_smoothing 0.1) (6, 5)", module, logits, kCrossEntropyCondition,
                       [targets](xg::nn::Module& m, const Tensor& x) {
                           return Inputs{static_cast<xg::nn::CrossEntropyLoss&>(m).forward(x, targets)};
                       }),
        {"mse_loss (4, 6) mean", [](const Inputs& in) { return Inputs{xg::nn::mse_loss(in[0], in[1])}; },
         {twin_leaf({4, 6}, 84), twin_leaf({4, 6}, 85)}, kMseCondition},
        {"mse_loss (4, 6) none, constant target",
         [](const Inputs& in) { return Inputs{xg::nn::mse_loss(in[0], in[1], Reduction::none)}; },
         {twin_leaf({4, 6}, 84), twin_leaf({4, 6}, 85, 1.0, 0.0, false)}, kMseCondition},
        module_nn_twin("MSELoss(sum) (4, 6)", mse_module, twin_leaf({4, 6}, 86), kMseCondition,
                       [](xg::nn::Module& m, const Tensor& x) {
                           return Inputs{static_cast<xg::nn::MSELoss&>(m).forward(x, xg::zeros_like(x) + 0.25)};
                       }),
    };
}
const xg_test_support::RegisterNnTwins registered("losses", &losses_twins);

TEST_CASE("float32 twin: cross_entropy, mse_loss and their modules agree with float64", "[float32][losses]") {
    xg_test_support::run_nn_twins(losses_twins());
}

// float32 logits are read from their float32 storage (widened into a buffer for the call, not a mirror
// kept with the node) and the loss and gradient come back as float32 storage: the same double kernels on
// the same values, so the loss is the float64 loss of the rounded logits, rounded once, bit for bit, and
// the gradient the float64 gradient (seeded with 1) rounded once.
TEST_CASE("float32: cross_entropy reads and returns float32 storage, without float64 mirrors", "[float32][losses]") {
    const xg::IndexArray targets{0, 3, 4, 1, 3, 2};
    const Tensor logits(twin_leaf({6, 5}, 83, 2.0).value(), xg::kFloat32, true);
    const Tensor loss = xg::nn::cross_entropy(logits, targets, Reduction::mean, 0.1);
    CHECK(loss.dtype() == xg::kFloat32);
    CHECK(loss.node()->native);
    loss.backward();
    CHECK(logits.node()->value_mirror == xg::Node::Mirror::None);
    CHECK(logits.node()->grad_mirror == xg::Node::Mirror::None);
    CHECK(loss.node()->value_mirror == xg::Node::Mirror::None);
    const Tensor widened(xg::to_float64_array(logits.values<float>()), true);
    const Tensor loss64 = xg::nn::cross_entropy(widened, targets, Reduction::mean, 0.1);
    loss64.backward();
    CHECK(loss.values<float>()() == static_cast<float>(loss64.item()));
    CHECK(xt::all(xt::equal(logits.grad_values<float>(), xg::to_float32_array(widened.grad_value()))));
}

}  // namespace xg_test_losses_float32
