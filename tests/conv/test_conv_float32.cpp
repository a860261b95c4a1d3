// `ctest -L float32`: convolution and pooling, functions and modules, in float32 against float64
// (tests/support/float32_nn_twins.hpp); conv2d/conv1d, max_pool2d and avg_pool2d as native float32
// nodes, and adaptive_avg_pool2d without a float64 mirror.
#include <cmath>
#include <memory>

#include <catch2/catch.hpp>

#include "nn/functional/functional.hpp"
#include "nn/modules/conv.hpp"
#include "tests/support/float32_cases.hpp"
#include "tests/support/float32_nn_twins.hpp"
#include "tests/support/norm_tiers.hpp"

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

// gamma_m = m u / (1 - m u): the bound of a sum of m products, in any order, each product and each
// partial sum rounded (with or without FMAs), relative to the sum of the products' absolute values.
double gamma(double m, xg::Dtype dtype) {
    const double mu = m * xg::unit_roundoff(dtype);
    return mu / (1.0 - mu);
}

// The largest |a - b| / bound over the elements (a, b float32 and float64 results of one shape).
double worst_ratio(const xg::FloatArray& a, const xg::Array& b, const xg::Array& bound) {
    REQUIRE(a.size() == b.size());
    double worst = 0.0;
    for (std::size_t k = 0; k < a.size(); ++k) {
        const double diff = std::abs(static_cast<double>(a.data()[k]) - b.data()[k]);
        if (diff == 0.0) continue;
        worst = std::max(worst, bound.data()[k] > 0.0 ? diff / bound.data()[k] : INFINITY);
    }
    return worst;
}

struct NativeConvCase {
    const char* what;
    xg::Shape x, w;
    bool bias;
    xg::nn::Size2 stride, padding, dilation;
    std::int64_t groups;
    bool one_d;  // conv1d: x (N, C, L), w (O, C/G, K), the 2-D sizes' width parts used
};

// conv2d and conv1d (an image of height 1, through reshape, itself native) as native float32
// nodes (tests/support/float32_cases.hpp): x, weight, bias, y and the seed get no float64 mirror,
// forward or backward.
// Reference tier: bit for bit the float64 route rounded once (the reference kernels widen every
// value and sum in double, in the float64 kernels' order, rounding each result once).
// Fast tier: sgemm sums the products in float32 (docs/precision.md, "Matrix products in float32"),
// so the bound is derived per element from float32 roundoff: with S the sum of the absolute values
// of an element's terms (the float64 op run on |x|, |W|, |b| and the seed |g|: exact products of
// float32 values, summed in double) and m their count, any order of float32 sums is within
// gamma_m(u32) S of the exact sum and the float64 route within gamma_m(u64) S; S itself is off by
// at most gamma_m(u64) S, a factor (1 + gamma_m(u64)) on the bound:
//   y:  m = C/G KH KW + 1 (the products and the bias: y is seeded with b, sgemm adds beta = 1)
//   dx: m = O/G KH KW (sgemm sums the O/G products of a column, col2im adds the taps that reach
//       the value in float32: at most O/G KH KW terms in all)
//   dW: m = N OH OW + 1 (each chunk of samples summed in float32 inside sgemm; the chunks added in
//       double, then one rounding: gamma_{N OH OW} + u <= gamma_{N OH OW + 1})
//   db: m = 1 (a double sum of N OH OW terms, rounded once: u |db| <= u S), plus the double sums'
//       gamma_{N OH OW}(u64) for both routes
TEST_CASE("float32 conv2d and conv1d are native float32 nodes without a float64 mirror: the float64 route's bits on the "
          "reference tier and within the derived sgemm bound on the fast tier",
          "[float32][conv]") {
    const NativeConvCase cases[] = {
        {"conv2d padding 1 with bias", {2, 3, 5, 5}, {4, 3, 3, 3}, true, 1, 1, 1, 1, false},
        {"conv2d 2 groups, strides, padding, dilation, no bias", {3, 4, 9, 11}, {6, 2, 3, 2}, false, {2, 3}, {2, 1}, {2, 1}, 2, false},
        {"conv2d above the threads' split", {4, 4, 23, 19}, {6, 4, 3, 3}, true, 1, 1, 1, 1, false},
        {"conv1d padding 1 with bias", {2, 3, 7}, {4, 3, 3}, true, 1, {0, 1}, 1, 1, true},
    };
    std::uint64_t seed = 80;
    for (const NativeConvCase& c : cases) {
        INFO(c.what << ": x " << xg::shape_str(c.x) << ", w " << xg::shape_str(c.w));
        const auto conv = [&c](const Inputs& p) {
            const Tensor b = c.bias ? p[2] : Tensor();
            if (c.one_d) return F::conv1d(p[0], p[1], b, c.stride.w, c.padding.w, c.dilation.w, c.groups);
            return F::conv2d(p[0], p[1], b, c.stride, c.padding, c.dilation, c.groups);
        };
        std::vector<xg::Array> leaves{xg_test_support::random_array(c.x, seed++), xg_test_support::random_array(c.w, seed++)};
        if (c.bias) leaves.push_back(xg_test_support::random_array({c.w[0]}, seed++));
        const xg::Shape y_shape = conv({Tensor(leaves[0]), Tensor(leaves[1]), c.bias ? Tensor(leaves[2]) : Tensor()}).shape();
        const xg::Array g = xg_test_support::random_array(y_shape, seed++);

        // the terms' counts (conv1d: KH = 1)
        const std::size_t KH = c.one_d ? 1 : c.w[2], KW = c.one_d ? c.w[2] : c.w[3];
        const std::size_t OHW = c.one_d ? y_shape[2] : y_shape[2] * y_shape[3];
        const double m_y = static_cast<double>(c.w[1] * KH * KW + 1);
        const double m_dx = static_cast<double>(c.w[0] / static_cast<std::size_t>(c.groups) * KH * KW);
        const double m_dw = static_cast<double>(c.x[0] * OHW + 1);
        const double m_db64 = static_cast<double>(c.x[0] * OHW);

        xg_test_support::check_native_float32_node_on_tiers(conv, leaves, g, [&](const xg_test_support::NativeFloat32Run& run) {
            // S: the float64 op on the absolute values of the float32 leaves and seed
            std::vector<Tensor> abs_leaves;
            for (const Tensor& t : run.leaves) abs_leaves.emplace_back(xt::abs(xg::to_float64_array(t.values<float>())), true);
            const Tensor abs_y = conv(abs_leaves);
            abs_y.backward(Tensor(xt::abs(run.route.g)));
            const auto bound = [](const xg::Array& S, double m32, double m64) -> xg::Array {
                const double g64 = gamma(m64, xg::kFloat64);
                return (gamma(m32, xg::kFloat32) + g64) * (1.0 + g64) * S;
            };
            const double y_ratio = worst_ratio(run.y.values<float>(), run.route.y.value(), bound(abs_y.value(), m_y, m_y));
            const double dx_ratio = worst_ratio(run.leaves[0].grad_values<float>(), run.route.leaves[0].grad_value(),
                                                bound(abs_leaves[0].grad_value(), m_dx, m_dx));
            const double dw_ratio = worst_ratio(run.leaves[1].grad_values<float>(), run.route.leaves[1].grad_value(),
                                                bound(abs_leaves[1].grad_value(), m_dw, m_dw));
            INFO("worst error / bound: y " << y_ratio << ", dx " << dx_ratio << ", dW " << dw_ratio);
            CHECK(y_ratio <= 1.0);
            CHECK(dx_ratio <= 1.0);
            CHECK(dw_ratio <= 1.0);
            if (c.bias) {
                const double db_ratio = worst_ratio(run.leaves[2].grad_values<float>(), run.route.leaves[2].grad_value(),
                                                    bound(abs_leaves[2].grad_value(), 1.0, m_db64));
                INFO("db " << db_ratio);
                CHECK(db_ratio <= 1.0);
            }
        });
    }
}

struct NativePoolCase {
    const char* what;
    xg::Shape x;
    bool max;  // max_pool2d, else avg_pool2d
    xg::nn::Size2 kernel, stride, padding, dilation;
    bool ceil_mode, count_include_pad;
    bool ties;  // x in steps of 0.5: many tied maxima (the first one wins in both routes)
};

// max_pool2d and avg_pool2d as native float32 nodes: x, y and the seed get no float64 mirror,
// forward or backward. Max pooling copies the winner (exact); every sum (an average's window, dx's
// parts from overlapping windows) is double on both tiers, in the same order, rounded once: so on
// both tiers the results are bit for bit the float64 route's rounded once, and max_pool2d's
// indices are the float64 route's.
TEST_CASE("float32 max_pool2d and avg_pool2d are native float32 nodes without a float64 mirror: the float64 route's bits "
          "rounded once on both tiers",
          "[float32][conv]") {
    const NativePoolCase cases[] = {
        {"max 3 stride 2 padding 1 (overlapping windows)", {2, 3, 7, 8}, true, 3, 2, 1, 1, false, true, false},
        {"max 2 x 3 stride (1, 2) dilation (2, 1) ceil_mode", {3, 2, 9, 10}, true, {2, 3}, {1, 2}, {1, 1}, {2, 1}, true, true, false},
        {"max 3 stride 1 padding 1, tied maxima", {2, 2, 6, 6}, true, 3, 1, 1, 1, false, true, true},
        {"avg 3 stride 2 padding 1 ceil_mode", {2, 3, 7, 8}, false, 3, 2, 1, 1, true, true, false},
        {"avg 3 x 2 stride 1 padding (1, 1), count_include_pad false", {3, 2, 9, 10}, false, {3, 2}, 1, {1, 1}, 1, false, false, false},
        {"avg 2 (no overlap), above one plane's size", {4, 8, 24, 20}, false, 2, 2, 0, 1, false, true, false},
    };
    std::uint64_t seed = 100;
    for (const NativePoolCase& c : cases) {
        INFO(c.what << ": x " << xg::shape_str(c.x));
        const auto pool = [&c](const Inputs& p) {
            if (c.max) return F::max_pool2d(p[0], c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode);
            return F::avg_pool2d(p[0], c.kernel, c.stride, c.padding, c.ceil_mode, c.count_include_pad);
        };
        xg::Array x = xg_test_support::random_array(c.x, seed++);
        if (c.ties) x = xt::round(x * 2.0) / 2.0;
        const xg::Array g = xg_test_support::random_array(pool({Tensor(x)}).shape(), seed++);
        xg_test_support::check_native_float32_node_on_tiers(pool, {x}, g, [](const xg_test_support::NativeFloat32Run& run) {
            xg_test_support::check_float64_route_bits(run.y, run.leaves, run.route);  // the fast tier's sums are the same doubles
        });
        if (c.max) {
            for (const xg::KernelTier tier : {xg::KernelTier::reference, xg::KernelTier::fast}) {
                const xg::KernelTierGuard guard(tier);
                const auto at32 = F::max_pool2d_with_indices(Tensor(x, xg::kFloat32), c.kernel, c.stride, c.padding, c.dilation,
                                                             c.ceil_mode).indices;
                const auto at64 = F::max_pool2d_with_indices(Tensor(xg::to_float64_array(xg::to_float32_array(x))), c.kernel,
                                                             c.stride, c.padding, c.dilation, c.ceil_mode).indices;
                CHECK(at32 == at64);
            }
        }
    }
}

// adaptive_avg_pool2d is composed (narrow, mean, stack, reshape; global pooling one mean), all of
// them on float32 storage: no node of its graph or of its gradient's gets a float64 mirror. mean
// sums in double and rounds once, so y is the float64 route's bits rounded once. dx is not: each
// part g / n is a float product (the constant 1/n and the product rounded, 2 u) and the walk adds
// the k parts of an element in float32 (k - 1 roundings, each within u of the parts' absolute sum);
// overlapping cells give k <= 4, so with S = sum_j |g_j| / n_j (the float64 route on the seed |g|)
// dx is within (gamma_5(u32) + gamma_5(u64)) (1 + gamma_5(u64)) S of the float64 route.
TEST_CASE("float32 adaptive_avg_pool2d makes no float64 mirror: y is the float64 route's bits rounded once, dx within its "
          "derived bound, on both tiers",
          "[float32][conv]") {
    const struct {
        xg::Shape x;
        xg::nn::Size2 out;
    } cases[] = {{{2, 3, 7, 9}, {3, 4}}, {{2, 2, 5, 6}, {2, 4}}, {{3, 2, 4, 5}, {1, 1}}};
    std::uint64_t seed = 120;
    for (const auto& c : cases) {
        INFO("x " << xg::shape_str(c.x) << " to (" << c.out.h << ", " << c.out.w << ")");
        const xg::Array x = xg_test_support::random_array(c.x, seed++);
        const xg::Array g = xg_test_support::random_array(F::adaptive_avg_pool2d(Tensor(x), c.out).shape(), seed++);
        for (const xg::KernelTier tier : {xg::KernelTier::reference, xg::KernelTier::fast}) {
            const xg::KernelTierGuard guard(tier);
            const Tensor x32(x, xg::kFloat32, true), g32(g, xg::kFloat32);
            const Tensor y32 = F::adaptive_avg_pool2d(x32, c.out);
            REQUIRE(y32.dtype() == xg::kFloat32);
            const std::vector<Tensor> dx32 = xg::grad({y32}, {x32}, {g32}, {true, false, false});
            xg::test::detail::for_each_node({y32, dx32[0], g32}, [](const xg::Node& n) {
                INFO("node " << n.op);
                CHECK(n.value_mirror == xg::Node::Mirror::None);
                CHECK(n.grad_mirror == xg::Node::Mirror::None);
            });
            const xg_test_support::Float64Route route = xg_test_support::float64_route(
                [&c](const Inputs& p) { return F::adaptive_avg_pool2d(p[0], c.out); }, {x32}, g32);
            CHECK(y32.values<float>() == xg::to_float32_array(route.y.value()));
            const Tensor abs_x(xt::abs(route.leaves[0].value()), true);
            F::adaptive_avg_pool2d(abs_x, c.out).backward(Tensor(xt::abs(route.g)));
            const double g64 = gamma(5, xg::kFloat64);
            const xg::Array bound = (gamma(5, xg::kFloat32) + g64) * (1.0 + g64) * abs_x.grad_value();
            const double ratio = worst_ratio(dx32[0].values<float>(), route.leaves[0].grad_value(), bound);
            INFO("worst dx error / bound " << ratio);
            CHECK(ratio <= 1.0);
        }
    }
}

TEST_CASE("conv2d with float32 x and a float64 weight keeps the float64 route", "[float32][conv]") {
    const Tensor x(xg_test_support::random_array({2, 3, 5, 5}, 90), xg::kFloat32, true);
    const Tensor w(xg_test_support::random_array({4, 3, 3, 3}, 91), true);
    xg_test_support::check_mixed_dtypes_keep_float64_route([](const Inputs& p) { return F::conv2d(p[0], p[1], Tensor(), 1, 1); },
                                                           {x, w});
}

}  // namespace xg_test_conv_float32
