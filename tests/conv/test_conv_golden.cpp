// Convolution and pooling against PyTorch golden values (tests/fixtures/README.md), the fused ops
// and their composed twins, through the modules where they exist; max-pool indices and ties.
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "nn/modules/conv.hpp"
#include "tests/support/golden.hpp"

namespace xg_test_conv_golden {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using namespace xg;
using namespace xg::test::golden;  // twin, leaf, load_parameters, check_module, backward_from_fixture, expect_fixtures
using nn::Size2;

TEST_CASE("conv2d matches PyTorch: groups, stride, padding, dilation, no bias", "[conv][golden]") {
    struct Variant {
        std::string tag;
        Size2 stride, padding, dilation;
        std::int64_t groups;
        bool bias;
    };
    for (const Variant& v : {Variant{"grouped", {2, 1}, {1, 2}, {1, 2}, 2, true}, Variant{"plain", 1, 1, 1, 1, false}}) {
        for (bool composed : {false, true}) {
            const std::string t = "_" + v.tag, name = "conv2d " + v.tag + twin(composed);
            Tensor x = leaf("conv2d", "x" + t), w = leaf("conv2d", "weight" + t);
            Tensor b = v.bias ? leaf("conv2d", "bias" + t) : Tensor();
            const auto conv = composed ? F::conv2d_composed : F::conv2d;
            Tensor y = conv(x, w, b, v.stride, v.padding, v.dilation, v.groups);
            backward_from_fixture(y, "conv2d", "grad_out" + t);
            expect_fixtures(name, "conv2d", {{"out", y.value()}, {"grad_x", x.grad_value()}, {"grad_weight", w.grad_value()}}, t);
            if (v.bias) expect_fixtures(name, "conv2d", {{"grad_bias", b.grad_value()}}, t);
        }
    }
}

TEST_CASE("Conv2d and Conv1d modules match PyTorch with its weights loaded", "[conv][golden]") {
    nn::Conv2d conv(4, 6, {3, 2}, {2, 1}, {1, 2}, {1, 2}, 2);
    load_parameters(conv, "conv2d", "_grouped");
    Tensor x = leaf("conv2d", "x_grouped");
    Tensor y = conv.forward(x);
    backward_from_fixture(y, "conv2d", "grad_out_grouped");
    expect_fixtures("Conv2d grouped", "conv2d", {{"out", y.value()}, {"grad_weight", conv.weight.grad_value()}}, "_grouped");

    nn::Conv1d conv1(4, 6, 3, 2, 1, 2, 2);
    check_module("Conv1d", conv1, "conv1d");
}

TEST_CASE("max_pool2d matches PyTorch: values, indices and gradients with tied maxima", "[conv][golden]") {
    struct Variant {
        std::string tag;
        Size2 kernel, stride, padding, dilation;
        bool ceil_mode;
    };
    for (const Variant& v : {Variant{"ceil", 3, 2, 1, 1, true}, Variant{"dilated", {2, 3}, {1, 2}, {1, 1}, {2, 1}, false}}) {
        const std::string t = "_" + v.tag;
        Tensor x = leaf("max_pool2d", "x");
        nn::MaxPool2d pool(v.kernel, v.stride, v.padding, v.dilation, v.ceil_mode);
        const auto r = pool.forward_with_indices(x);
        backward_from_fixture(r.output, "max_pool2d", "grad_out" + t);
        expect_close("max_pool2d " + v.tag + " out", r.output.value(), fixture("max_pool2d", "out" + t));
        const IndexArray want = test::fixture_index("max_pool2d", "indices" + t);
        CHECK(r.indices == want);
        // The tie rule decides where the gradient lands, so it must match exactly, not just in sum.
        expect_close("max_pool2d " + v.tag + " grad_x", x.grad_value(), fixture("max_pool2d", "grad_x" + t));
    }
}

TEST_CASE("max_pool2d_composed gives PyTorch's values (its gradient shares ties, so it is compared on distinct values)",
          "[conv][golden]") {
    Tensor x = leaf("max_pool2d", "x");
    const Tensor y = F::max_pool2d_composed(x, 3, 2, 1, 1, true);
    expect_close("max_pool2d_composed ceil out", y.value(), fixture("max_pool2d", "out_ceil"));
    const Tensor y2 = F::max_pool2d_composed(x, {2, 3}, Size2{1, 2}, {1, 1}, {2, 1}, false);
    expect_close("max_pool2d_composed dilated out", y2.value(), fixture("max_pool2d", "out_dilated"));
}

TEST_CASE("avg_pool2d matches PyTorch: ceil_mode and count_include_pad", "[conv][golden]") {
    struct Variant {
        std::string tag;
        Size2 kernel, stride, padding;
        bool ceil_mode, count_include_pad;
    };
    for (const Variant& v : {Variant{"ceil_pad", 3, 2, 1, true, true}, Variant{"ceil_nopad", 3, 2, 1, true, false},
                             Variant{"rect", {2, 3}, {1, 2}, {1, 1}, false, true},
                             Variant{"rect_nopad", {2, 3}, {1, 2}, {1, 1}, false, false}}) {
        for (bool composed : {false, true}) {
            const std::string t = "_" + v.tag, name = "avg_pool2d " + v.tag + twin(composed);
            Tensor x = leaf("avg_pool2d", "x");
            Tensor y = composed ? F::avg_pool2d_composed(x, v.kernel, v.stride, v.padding, v.ceil_mode, v.count_include_pad)
                                : nn::AvgPool2d(v.kernel, v.stride, v.padding, v.ceil_mode, v.count_include_pad).forward(x);
            backward_from_fixture(y, "avg_pool2d", "grad_out" + t);
            expect_fixtures(name, "avg_pool2d", {{"out", y.value()}, {"grad_x", x.grad_value()}}, t);
        }
    }
}

TEST_CASE("adaptive_avg_pool2d matches PyTorch: global (1, 1) and uneven (3, 2) windows", "[conv][golden]") {
    for (const auto& [tag, size] : {std::pair<std::string, Size2>{"global", 1}, std::pair<std::string, Size2>{"3x2", {3, 2}}}) {
        Tensor x = leaf("adaptive_avg_pool2d", "x");
        Tensor y = nn::AdaptiveAvgPool2d(size).forward(x);
        backward_from_fixture(y, "adaptive_avg_pool2d", "grad_out_" + tag);
        expect_fixtures("adaptive_avg_pool2d " + tag, "adaptive_avg_pool2d", {{"out", y.value()}, {"grad_x", x.grad_value()}},
                        "_" + tag);
    }
}

}  // namespace xg_test_conv_golden
