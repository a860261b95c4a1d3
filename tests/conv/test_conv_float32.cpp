// `ctest -L float32`: convolution and pooling, functions and modules, in float32 against float64
// (tests/support/float32_nn_twins.hpp).
#include <memory>

#include <catch2/catch.hpp>

#include "nn/functional/functional.hpp"
#include "nn/modules/conv.hpp"
#include "tests/support/float32_nn_twins.hpp"

namespace xg_test_conv_float32 {

using namespace xg_test_support::nn_twin_names;  // F, Tensor, Inputs, NnTwinList, twin_leaf, module_nn_twin

// A convolution is a product with K = C KH KW = 27 terms per output (tests/linear/test_linear_float32.cpp):
// rounding x and W moves y by 2u sum |x||W| ~ 2u 0.25 sqrt(K) max |y| = 2.6u, 5.2u for the worst
// rows; b and y add u each: 7.2. The gradients (dx: O KH KW = 36 terms, dW: N OH OW = 50 terms)
// read the rounded seed as a third factor: 3 * 0.25 sqrt(50) * 2 + 1 = 11.6, so 12.
constexpr double kConvCondition = 12;
// Pooling selects (max) or averages (avg) rounded inputs: x's and the result's rounding, 2 u; the
// gradient routes or spreads the rounded seed and sums the overlapping windows' parts (at most 4 for
// these strides), rounded, which may cancel to half: 2 (u + u) + u = 5.
constexpr double kPoolCondition = 5;

NnTwinList conv_twins() {
    const auto conv = [](const Inputs& in) { return Inputs{F::conv2d(in[0], in[1], in[2], 1, 1)}; };
    const auto conv_composed = [](const Inputs& in) { return Inputs{F::conv2d_composed(in[0], in[1], in[2], 1, 1)}; };
    const auto conv_grouped = [](const Inputs& in) { return Inputs{F::conv2d(in[0], in[1], Tensor(), {2, 1}, 0, 1, 2)}; };
    const auto conv1 = [](const Inputs& in) { return Inputs{F::conv1d(in[0], in[1], in[2], 1, 1)}; };
    const Inputs conv_inputs{twin_leaf({2, 3, 5, 5}, 71), twin_leaf({4, 3, 3, 3}, 72), twin_leaf({4}, 73)};
    const Tensor image = twin_leaf({2, 2, 5, 6}, 74);
    const auto conv_module = std::make_shared<xg::nn::Conv2d>(2, 3, 3, 1, 1);
    const auto conv1d_module = std::make_shared<xg::nn::Conv1d>(2, 3, 3);
    const auto model = std::make_shared<xg::nn::Sequential>(std::initializer_list<std::shared_ptr<xg::nn::Module>>{
        std::make_shared<xg::nn::MaxPool2d>(2, 1), std::make_shared<xg::nn::AvgPool2d>(2, 1, 1),
        std::make_shared<xg::nn::AdaptiveAvgPool2d>(xg::nn::Size2(2, 3)), std::make_shared<xg::nn::Flatten>()});
    return {
        {"conv2d (2, 3, 5, 5) * (4, 3, 3, 3) padding 1", conv, conv_inputs, kConvCondition},
        // the composed twin rounds the unfolded columns (exact copies) and the product before the bias: 13
        {"conv2d_composed (2, 3, 5, 5) * (4, 3, 3, 3) padding 1", conv_composed, conv_inputs, kConvCondition + 1},
        {"conv2d groups 2 stride (2, 1) (2, 4, 5, 5) * (4, 2, 3, 3)", conv_grouped,
         {twin_leaf({2, 4, 5, 5}, 75), twin_leaf({4, 2, 3, 3}, 76)}, kConvCondition},
        {"conv1d (2, 3, 7) * (4, 3, 3) padding 1", conv1, {twin_leaf({2, 3, 7}, 77), twin_leaf({4, 3, 3}, 78), conv_inputs[2]},
         kConvCondition},
        module_nn_twin("Conv2d(2, 3, 3, padding 1)", conv_module, image, kConvCondition),
        module_nn_twin("Conv1d(2, 3, 3)", conv1d_module, twin_leaf({3, 2, 8}, 79), kConvCondition),
        {"max_pool2d 3 stride 2 padding 1", [](const Inputs& in) { return Inputs{F::max_pool2d(in[0], 3, 2, 1)}; }, {image},
         kPoolCondition},
        {"max_pool2d_composed 3 stride 2 padding 1",
         [](const Inputs& in) { return Inputs{F::max_pool2d_composed(in[0], 3, 2, 1)}; }, {image}, kPoolCondition},
        {"avg_pool2d 3 stride 2 padding 1 ceil_mode",
         [](const Inputs& in) { return Inputs{F::avg_pool2d(in[0], 3, 2, 1, true)}; }, {image}, kPoolCondition},
        // the composed average divides a rounded window sum by its count: one store more, 6
        {"avg_pool2d_composed 3 stride 2 padding 1 ceil_mode",
         [](const Inputs& in) { return Inputs{F::avg_pool2d_composed(in[0], 3, 2, 1, true)}; }, {image}, kPoolCondition + 1},
        {"adaptive_avg_pool2d (2, 4)", [](const Inputs& in) { return Inputs{F::adaptive_avg_pool2d(in[0], {2, 4})}; },
         {image}, kPoolCondition},
        // pad and unfold copy rounded values (u); their gradients sum at most 4 rounded seed parts: 5
        {"pad (1, 2, 0, 1) value 0.5", [](const Inputs& in) { return Inputs{F::pad(in[0], {1, 2, 0, 1}, 0.5)}; }, {image},
         kPoolCondition},
        {"unfold 2 x 3 padding 1 stride 2", [](const Inputs& in) { return Inputs{F::unfold(in[0], {2, 3}, 1, 1, 2)}; },
         {image}, kPoolCondition},
        // MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, Flatten in a row: three poolings' roundings, 3 * 5 = 15
        module_nn_twin("MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, Flatten", model, image, 3 * kPoolCondition),
    };
}
const xg_test_support::RegisterNnTwins registered("conv", &conv_twins);

TEST_CASE("float32 twin: convolution and pooling agree with float64", "[float32][conv]") {
    xg_test_support::run_nn_twins(conv_twins());
}

}  // namespace xg_test_conv_float32
