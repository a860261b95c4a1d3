// Finite-difference checks of convolution and pooling: the fused ops and their composed twins
// w.r.t. the input and every parameter, across stride, padding, dilation, groups and ceil_mode;
// unfold, pad, conv1d, adaptive pooling and the modules (Conv2d, Conv1d, pools, Flatten).
#include <string>

#include <catch2/catch.hpp>

#include "nn/modules/conv.hpp"
#include "tests/support/gradcheck_cases.hpp"

namespace xg_test_conv_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using namespace xg::test::gradcheck_cases;

TEST_CASE("gradcheck conv2d and conv2d_composed (stride, padding, dilation, groups, no bias)", "[gradcheck][conv]") {
    struct Case {
        std::string name;
        Shape x, w;
        nn::Size2 stride, padding, dilation;
        std::int64_t groups;
    };
    for (const Case& k : {Case{"3x3 pad 1", {2, 3, 5, 4}, {4, 3, 3, 3}, 1, 1, 1, 1},
                          Case{"stride (2,1) pad (1,2) dilation (1,2) groups 2", {2, 4, 6, 5}, {6, 2, 2, 3}, {2, 1}, {1, 2}, {1, 2}, 2},
                          Case{"1x1", {1, 3, 3, 3}, {2, 3, 1, 1}, 1, 0, 1, 1},
                          Case{"(2,2) dilation (2,1) pad (0,1)", {1, 2, 5, 4}, {2, 2, 2, 2}, 1, {0, 1}, {2, 1}, 1}}) {
        const Tensor x = randn_leaf(k.x, 1), w = randn_leaf(k.w, 2), b = randn_leaf({k.w[0]}, 3);
        check_fused_and_composed("conv2d", " " + k.name,
                                 [&](const Inputs& t) { return F::conv2d(t[0], t[1], t[2], k.stride, k.padding, k.dilation, k.groups); },
                                 [&](const Inputs& t) {
                                     return F::conv2d_composed(t[0], t[1], t[2], k.stride, k.padding, k.dilation, k.groups);
                                 }, {x, w, b});
    }
    check_gradient([](const Inputs& t) { return F::conv2d(t[0], t[1], Tensor(), 2, 1); }, {randn_leaf({2, 2, 5, 5}, 4), randn_leaf({3, 2, 3, 3}, 5)},
                   "conv2d no bias stride 2");
}

TEST_CASE("gradcheck conv1d, unfold and pad", "[gradcheck][conv]") {
    check_gradient([](const Inputs& t) { return F::conv1d(t[0], t[1], t[2], 2, 1, 2, 2); },
                   {randn_leaf({2, 4, 9}, 6), randn_leaf({6, 2, 3}, 7), randn_leaf({6}, 8)}, "conv1d stride 2 pad 1 dilation 2 groups 2");
    check_gradient([](const Inputs& t) { return F::unfold(t[0], {2, 3}, {1, 2}, 1, {2, 1}); }, {randn_leaf({2, 2, 4, 5}, 9)},
                   "unfold (2,3) dilation (1,2) pad 1 stride (2,1)");
    // a row dilation of 2 as well (the case above dilates the columns only)
    check_gradient([](const Inputs& t) { return F::unfold(t[0], {3, 2}, {2, 1}, {0, 1}, {1, 2}); }, {randn_leaf({2, 2, 6, 4}, 12)},
                   "unfold (3,2) dilation (2,1) pad (0,1) stride (1,2)");
    check_gradient([](const Inputs& t) { return F::unfold(t[0], 2, 2, 1); }, {randn_leaf({1, 3, 4, 5}, 13)}, "unfold 2x2 dilation 2 pad 1");
    check_gradient([](const Inputs& t) { return F::pad(t[0], {1, 2, 0, 1}, 0.5); }, {randn_leaf({2, 3, 4}, 10)}, "pad last two axes");
}

TEST_CASE("gradcheck max_pool2d and max_pool2d_composed (padding, dilation, ceil_mode)", "[gradcheck][conv]") {
    struct Case {
        std::string name;
        nn::Size2 kernel, stride, padding, dilation;
        bool ceil_mode;
    };
    // randn inputs have no ties, so both twins are differentiable at the checked point.
    for (const Case& k : {Case{"2x2", 2, 2, 0, 1, false}, Case{"3x3 stride 2 pad 1 ceil", 3, 2, 1, 1, true},
                          Case{"(2,3) stride (1,2) pad 1 dilation (2,1)", {2, 3}, {1, 2}, 1, {2, 1}, false}}) {
        const Tensor x = randn_leaf({2, 2, 7, 6}, 11);
        check_fused_and_composed("max_pool2d", " " + k.name,
                                 [&](const Inputs& t) { return F::max_pool2d(t[0], k.kernel, k.stride, k.padding, k.dilation, k.ceil_mode); },
                                 [&](const Inputs& t) {
                                     return F::max_pool2d_composed(t[0], k.kernel, k.stride, k.padding, k.dilation, k.ceil_mode);
                                 }, {x});
    }
}

TEST_CASE("gradcheck avg_pool2d and avg_pool2d_composed (count_include_pad, ceil_mode)", "[gradcheck][conv]") {
    for (bool include_pad : {true, false}) {
        for (bool ceil_mode : {false, true}) {
            const std::string name = std::string(include_pad ? "count_include_pad" : "exclude pad") + (ceil_mode ? " ceil" : "");
            const Tensor x = randn_leaf({2, 2, 7, 6}, 12);
            check_fused_and_composed("avg_pool2d", " 3x3 stride 2 pad 1 " + name,
                                     [&](const Inputs& t) { return F::avg_pool2d(t[0], 3, 2, 1, ceil_mode, include_pad); },
                                     [&](const Inputs& t) { return F::avg_pool2d_composed(t[0], 3, 2, 1, ceil_mode, include_pad); }, {x});
        }
    }
}

TEST_CASE("gradcheck adaptive_avg_pool2d (global and uneven windows)", "[gradcheck][conv]") {
    check_gradient([](const Inputs& t) { return F::adaptive_avg_pool2d(t[0], 1); }, {randn_leaf({2, 3, 4, 5}, 13)}, "adaptive_avg_pool2d (1,1)");
    check_gradient([](const Inputs& t) { return F::adaptive_avg_pool2d(t[0], {3, 2}); }, {randn_leaf({2, 2, 7, 5}, 14)},
                   "adaptive_avg_pool2d (3,2)");
}

TEST_CASE("gradcheck Conv2d, Conv1d, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d and Flatten modules", "[gradcheck][conv]") {
    nn::Conv2d conv(2, 3, 3, 1, 1);
    check_forward("Conv2d module", conv, randn_leaf({2, 2, 4, 4}, 15), affine_slots(conv));
    nn::Conv1d conv1(2, 3, 3, 1, 1);
    check_forward("Conv1d module", conv1, randn_leaf({2, 2, 6}, 16), affine_slots(conv1));
    nn::MaxPool2d max_pool(2);
    nn::AvgPool2d avg_pool(2, 1, 1, false, false);
    nn::AdaptiveAvgPool2d global(1);
    nn::Flatten flatten;
    const Tensor x = randn_leaf({2, 2, 5, 4}, 17);
    check_forward("MaxPool2d module", max_pool, x, {});
    check_forward("AvgPool2d module", avg_pool, x, {});
    check_gradient([&](const Inputs& t) { return flatten.forward(global.forward(t[0])); }, {x}, "AdaptiveAvgPool2d + Flatten modules");
}

}  // namespace xg_test_conv_gradcheck
