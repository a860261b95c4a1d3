// Convolution and pooling against PyTorch golden values (tests/fixtures/README.md), the fused ops
// and their composed twins, through the modules where they exist; max-pool indices and ties.
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "nn/modules/conv.hpp"
#include "tests/support/fixtures.hpp"

namespace xg_test_conv_golden {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using namespace xg;
using xg::test::leaf;
using xg::test::expect_close;
using nn::Size2;
using test::fixture;

namespace {

const char* twin(bool composed) { return composed ? " (composed)" : " (fused)"; }

}  // namespace

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
            y.backward(Tensor(fixture("conv2d", "grad_out" + t)));
            expect_close(name + " out", y.value(), fixture("conv2d", "out" + t));
            expect_close(name + " grad_x", x.grad_value(), fixture("conv2d", "grad_x" + t));
            expect_close(name + " grad_weight", w.grad_value(), fixture("conv2d", "grad_weight" + t));
            if (v.bias) expect_close(name + " grad_bias", b.grad_value(), fixture("conv2d", "grad_bias" + t));
        }
    }
}

TEST_CASE("Conv2d and Conv1d modules match PyTorch with its weights loaded", "[conv][golden]") {
    nn::Conv2d conv(4, 6, {3, 2}, {2, 1}, {1, 2}, {1, 2}, 2);
    conv.load_state_dict({{"weight", fixture("conv2d", "weight_grouped")}, {"bias", fixture("conv2d", "bias_grouped")}});
    Tensor x = leaf("conv2d", "x_grouped");
    Tensor y = conv.forward(x);
    y.backward(Tensor(fixture("conv2d", "grad_out_grouped")));
    expect_close("Conv2d grouped out", y.value(), fixture("conv2d", "out_grouped"));
    expect_close("Conv2d grouped grad_weight", conv.weight.grad_value(), fixture("conv2d", "grad_weight_grouped"));

    nn::Conv1d conv1(4, 6, 3, 2, 1, 2, 2);
    conv1.load_state_dict({{"weight", fixture("conv1d", "weight")}, {"bias", fixture("conv1d", "bias")}});
    Tensor x1 = leaf("conv1d", "x");
    Tensor y1 = conv1.forward(x1);
    y1.backward(Tensor(fixture("conv1d", "grad_out")));
    expect_close("Conv1d out", y1.value(), fixture("conv1d", "out"));
    expect_close("Conv1d grad_x", x1.grad_value(), fixture("conv1d", "grad_x"));
    expect_close("Conv1d grad_weight", conv1.weight.grad_value(), fixture("conv1d", "grad_weight"));
    expect_close("Conv1d grad_bias", conv1.bias.grad_value(), fixture("conv1d", "grad_bias"));
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
        r.output.backward(Tensor(fixture("max_pool2d", "grad_out" + t)));
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
            y.backward(Tensor(fixture("avg_pool2d", "grad_out" + t)));
            expect_close(name + " out", y.value(), fixture("avg_pool2d", "out" + t));
            expect_close(name + " grad_x", x.grad_value(), fixture("avg_pool2d", "grad_x" + t));
        }
    }
}

TEST_CASE("adaptive_avg_pool2d matches PyTorch: global (1, 1) and uneven (3, 2) windows", "[conv][golden]") {
    for (const auto& [tag, size] : {std::pair<std::string, Size2>{"global", 1}, std::pair<std::string, Size2>{"3x2", {3, 2}}}) {
        Tensor x = leaf("adaptive_avg_pool2d", "x");
        Tensor y = nn::AdaptiveAvgPool2d(size).forward(x);
        y.backward(Tensor(fixture("adaptive_avg_pool2d", "grad_out_" + tag)));
        expect_close("adaptive_avg_pool2d " + tag + " out", y.value(), fixture("adaptive_avg_pool2d", "out_" + tag));
        expect_close("adaptive_avg_pool2d " + tag + " grad_x", x.grad_value(), fixture("adaptive_avg_pool2d", "grad_x_" + tag));
    }
}

}  // namespace xg_test_conv_golden
