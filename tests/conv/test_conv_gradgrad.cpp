// Second derivatives of convolution and pooling at small shapes and their boundaries.
#include <catch2/catch.hpp>

#include "tests/support/gradgrad_cases.hpp"

namespace xg_test_conv_gradgrad {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg::test::gradgrad;  // check_second_order, randn_leaf, square, Inputs, F

TEST_CASE("gradgradcheck of convolution and pooling", "[gradgradcheck][nn]") {
    check_second_order([](const Inputs& a) { return F::conv2d(a[0], a[1], a[2], 2, 1, 1, 2); },
                       {randn_leaf({1, 2, 4, 4}, 261), randn_leaf({2, 1, 3, 3}, 262), randn_leaf({2}, 263)},
                       "conv2d stride 2 padding 1 groups 2");
    check_second_order([](const Inputs& a) { return F::conv2d(a[0], a[1], Tensor(), 1, 0, 2); },
                       {randn_leaf({2, 1, 4, 4}, 264), randn_leaf({1, 1, 2, 2}, 265)}, "conv2d dilation 2 no bias");
    check_second_order([](const Inputs& a) { return F::conv1d(a[0], a[1], a[2], 1, 1); },
                       {randn_leaf({1, 2, 4}, 266), randn_leaf({3, 2, 2}, 267), randn_leaf({3}, 268)}, "conv1d");
    check_second_order([](const Inputs& a) { return square(F::max_pool2d(a[0], 2, xg::nn::Size2(1), 1)); },
                       {randn_leaf({1, 2, 3, 3}, 269)}, "max_pool2d padding 1");
    check_second_order([](const Inputs& a) { return square(F::avg_pool2d(a[0], 2, std::nullopt, 1, true, false)); },
                       {randn_leaf({1, 1, 3, 3}, 270)}, "avg_pool2d ceil_mode");
    check_second_order([](const Inputs& a) { return square(F::adaptive_avg_pool2d(a[0], {2, 2})); },
                       {randn_leaf({1, 1, 3, 3}, 271)}, "adaptive_avg_pool2d uneven");
}

}  // namespace xg_test_conv_gradgrad
