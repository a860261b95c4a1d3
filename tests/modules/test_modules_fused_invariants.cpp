// Invariants checked over every fused op at once (the per-op ones are in tests/<op>/): each fused
// op agrees with its composed twin in value and gradient (also on outputs large enough to stream),
// constant rows and channels return beta exactly, and bad shapes raise xg::Error naming the op.
#include <cmath>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/engine/random.hpp"
#include "nn/fast/kernel_primitives.hpp"
#include "nn/functional/functional.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/norm_kit.hpp"
#include "tests/support/op_runs.hpp"

namespace xg_test_modules_fused_invariants {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using xg::Array;
using xg::Shape;
using xg::Tensor;
namespace F = xg::nn::functional;

namespace {

using xg::test::run;

void expect_twins_agree(const xg::test::OpOfLeaves& fused, const xg::test::OpOfLeaves& composed, const std::vector<Array>& inputs,
                        const std::string& name) {
    std::vector<Tensor> plain(inputs.begin(), inputs.end());
    const Array g = xg::randn(fused(plain).shape()).value();
    const std::vector<Array> a = run(fused, inputs, g), b = run(composed, inputs, g);
    double worst = 0.0;
    for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, xg::test::max_rel_diff(a[i], b[i]));
    INFO(name);
    CHECK(worst <= 1e-12);
    fmt::print("fused vs composed {:<40} worst rel diff {:.2e}\n", name, worst);
}

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const xg::Error& e) {
        return e.what();
    }
    return "<no xg::Error thrown>";
}

}  // namespace

using xg::test::all_finite;
using xg::test::randn_array;

TEST_CASE("fused ops agree with their composed twins in value and gradient", "[fused][invariants]") {
    xg::manual_seed(21);
    for (const Shape& xs : {Shape{6, 5}, Shape{3, 4, 5}}) {
        const std::string d = xg::shape_str(xs);
        const Array x = randn_array(xs), w5 = randn_array({5}), b5 = randn_array({5});
        expect_twins_agree([](auto& t) { return F::linear(t[0], t[1], t[2]); },
                           [](auto& t) { return F::linear_composed(t[0], t[1], t[2]); }, {x, randn_array({3, 5}), randn_array({3})},
                           "linear " + d);
        for (auto m : {F::GeluApproximate::none, F::GeluApproximate::tanh}) {
            expect_twins_agree([m](auto& t) { return F::gelu(t[0], m); }, [m](auto& t) { return F::gelu_composed(t[0], m); },
                               {x}, (m == F::GeluApproximate::none ? "gelu " : "gelu tanh ") + d);
        }
        expect_twins_agree([](auto& t) { return F::layer_norm(t[0], {5}, t[1], t[2]); },
                           [](auto& t) { return F::layer_norm_composed(t[0], {5}, t[1], t[2]); }, {x, w5, b5},
                           "layer_norm " + d);
        expect_twins_agree([](auto& t) { return F::rms_norm(t[0], {5}, t[1]); },
                           [](auto& t) { return F::rms_norm_composed(t[0], {5}, t[1]); }, {x, w5}, "rms_norm " + d);
        const Array wc = randn_array({xs[1]}), bc = randn_array({xs[1]});
        for (bool training : {true, false}) {
            Tensor rm(randn_array({xs[1]})), rv(xg::uniform({xs[1]}, 0.5, 2.0).value());
            expect_twins_agree([=](auto& t) { return F::batch_norm(t[0], rm.detach(), rv.detach(), t[1], t[2], training); },
                               [=](auto& t) { return F::batch_norm_composed(t[0], rm.detach(), rv.detach(), t[1], t[2], training); },
                               {x, wc, bc}, std::string(training ? "batch_norm train " : "batch_norm eval ") + d);
        }
    }
    const Array x3 = randn_array({2, 3, 4});
    expect_twins_agree([](auto& t) { return F::layer_norm(t[0], {3, 4}, t[1], t[2]); },
                       [](auto& t) { return F::layer_norm_composed(t[0], {3, 4}, t[1], t[2]); },
                       {x3, randn_array({3, 4}), randn_array({3, 4})}, "layer_norm over (3, 4)");
}

// Outputs of 4 MiB and more take the streaming-store path of the kernels (nn/fast/kernel_primitives.hpp);
// these shapes cover it with row and column tails (widths not a multiple of 8, row counts not a
// multiple of 4) and the ordinary path for an odd width at the same size; BatchNorm's short rows
// ((8195, 130): 1040 bytes, walked from the end in blocks of 8) with a column tail of 2.
TEST_CASE("fused normalisations agree with their twins on outputs large enough to stream", "[fused][invariants]") {
    xg::manual_seed(24);
    const auto size_of = [](const Shape& s) { return std::accumulate(s.begin(), s.end(), std::size_t{1}, std::multiplies<>()); };
    for (const Shape& xs : {Shape{1030, 1020}, Shape{1100, 1001}}) {
        const Array x = randn_array(xs);
        CHECK(xg::nn::detail::streams(x.data(), size_of(xs), xs[1]) == (xs[1] % 2 == 0));
        expect_twins_agree([&](auto& t) { return F::layer_norm(t[0], {xs[1]}, t[1], t[2]); },
                           [&](auto& t) { return F::layer_norm_composed(t[0], {xs[1]}, t[1], t[2]); },
                           {x, randn_array({xs[1]}), randn_array({xs[1]})}, "layer_norm " + xg::shape_str(xs));
        expect_twins_agree([&](auto& t) { return F::rms_norm(t[0], {xs[1]}, t[1]); },
                           [&](auto& t) { return F::rms_norm_composed(t[0], {xs[1]}, t[1]); }, {x, randn_array({xs[1]})},
                           "rms_norm " + xg::shape_str(xs));
    }
    for (const Shape& xs : {Shape{2051, 516}, Shape{8195, 130}, Shape{65, 16, 1030}}) {
        const std::size_t width = xs.size() == 2 ? xs[1] : xs[2];
        const Array x = randn_array(xs);
        CHECK(xg::nn::detail::streams(x.data(), size_of(xs), width));
        Tensor rm(randn_array({xs[1]})), rv(xg::uniform({xs[1]}, 0.5, 2.0).value());
        for (bool training : {true, false}) {
            expect_twins_agree([=](auto& t) { return F::batch_norm(t[0], rm.detach(), rv.detach(), t[1], t[2], training); },
                               [=](auto& t) { return F::batch_norm_composed(t[0], rm.detach(), rv.detach(), t[1], t[2], training); },
                               {x, randn_array({xs[1]}), randn_array({xs[1]})},
                               std::string(training ? "batch_norm train " : "batch_norm eval ") + xg::shape_str(xs));
        }
    }
    // GroupNorm streams per channel, so only with an even spatial size; few samples keep the sums
    // behind dw, db at N S = 4120 terms
    for (const Shape& xs : {Shape{4, 128, 1030}, Shape{4, 128, 1025}}) {
        const Array x = randn_array(xs);
        CHECK(xg::nn::detail::streams(x.data(), size_of(xs), xs[2]) == (xs[2] % 2 == 0));
        expect_twins_agree([](auto& t) { return F::group_norm(t[0], 4, t[1], t[2]); },
                           [](auto& t) { return F::group_norm_composed(t[0], 4, t[1], t[2]); },
                           {x, randn_array({xs[1]}), randn_array({xs[1]})},
                           "group_norm 4 groups " + xg::shape_str(xs));
    }
}

TEST_CASE("constant rows and channels return beta exactly with finite gradients", "[fused][invariants]") {
    for (double eps : {1e-5, 1e-8}) {
        for (std::size_t D : {3, 7, 768}) {
            for (double c : {0.1, -3.7, 1e6 + 0.3, 1.0 / 3.0}) {
                INFO("eps " << eps << " D " << D << " constant " << c);
                const Array x = xg::full({2, D}, c).value(), w = randn_array({D}), b = randn_array({D}), g = randn_array({2, D});
                const auto r = run([eps, D](auto& t) { return F::layer_norm(t[0], {D}, t[1], t[2], eps); }, {x, w, b}, g);
                for (std::size_t i = 0; i < 2; ++i)
                    for (std::size_t j = 0; j < D; ++j) REQUIRE(r[0](i, j) == b(j));
                CHECK((all_finite(r[1]) && all_finite(r[2]) && all_finite(r[3])));
                const Array xb = xg::full({D, 2, 3}, c).value(), wb = randn_array({2}), bb = randn_array({2});
                const auto s = run([eps](auto& t) { return F::batch_norm(t[0], Tensor(), Tensor(), t[1], t[2], true, 0.1, eps); },
                                   {xb, wb, bb}, randn_array({D, 2, 3}));
                for (std::size_t n = 0; n < D; ++n)
                    for (std::size_t k = 0; k < 2; ++k)
                        for (std::size_t l = 0; l < 3; ++l) REQUIRE(s[0](n, k, l) == bb(k));
                CHECK((all_finite(s[1]) && all_finite(s[2]) && all_finite(s[3])));
            }
        }
    }
}

TEST_CASE("fused ops reject bad shapes with xg::Error naming the op and shapes", "[fused][invariants]") {
    using Catch::Matchers::Contains;
    const Tensor x = xg::zeros({2, 3, 5});
    CHECK_THAT(error_of([&] { F::linear(x, xg::zeros({4, 6})); }),
               Contains("linear") && Contains("(2, 3, 5)") && Contains("(4, 6)") && Contains("in_features"));
    CHECK_THAT(error_of([&] { F::linear(x, xg::zeros({4, 5}), xg::zeros({3})); }), Contains("bias") && Contains("(3,)"));
    CHECK_THAT(error_of([&] { F::linear(x, xg::zeros({20})); }), Contains("2-D"));
    CHECK_THAT(error_of([&] { F::layer_norm(x, {3}); }),
               Contains("layer_norm") && Contains("normalized_shape (3,)") && Contains("(2, 3, 5)"));
    CHECK_THAT(error_of([&] { F::layer_norm(x, {3, 5}, xg::ones({5})); }),
               Contains("weight") && Contains("(3, 5)") && Contains("(5,)"));
    CHECK_THAT(error_of([&] { F::layer_norm(x, {5}, Tensor(), xg::ones({4})); }), Contains("bias"));
    CHECK_THAT(error_of([&] { F::layer_norm(x, {}); }), Contains("at least one axis"));
    CHECK_THAT(error_of([&] { F::layer_norm_composed(x, {2, 5}); }), Contains("layer_norm_composed"));
    CHECK_THAT(error_of([&] { F::rms_norm(x, {5}, xg::ones({3})); }), Contains("rms_norm") && Contains("weight"));
    CHECK_THAT(error_of([&] { F::rms_norm(x, {4}); }), Contains("does not match"));
    const Tensor bx = xg::zeros({6, 4});
    CHECK_THAT(error_of([&] { F::batch_norm(bx, Tensor(), Tensor(), xg::ones({3}), Tensor(), true); }),
               Contains("batch_norm") && Contains("weight") && Contains("(6, 4)") && Contains("4 channels"));
    CHECK_THAT(error_of([&] { F::batch_norm(bx, xg::zeros({5}), xg::ones({4}), Tensor(), Tensor(), true); }),
               Contains("running_mean") && Contains("(5,)"));
    CHECK_THAT(error_of([&] { F::batch_norm(bx, xg::zeros({4}), xg::ones({2}), Tensor(), Tensor(), false); }),
               Contains("running_var"));
    CHECK_THAT(error_of([&] { F::batch_norm(bx, Tensor(), Tensor(), Tensor(), Tensor(), false); }), Contains("running"));
    // (N, C, H, W) is accepted since BatchNorm2d (as PyTorch's (N, C, *)); an input without a channel axis is not.
    CHECK_THAT(error_of([&] { F::batch_norm(xg::zeros({4}), Tensor(), Tensor(), Tensor(), Tensor(), true); }),
               Contains("batch_norm") && Contains("(4,)"));
    for (const Shape& one : {Shape{1, 4}, Shape{1, 4, 1}}) {
        const Tensor t = xg::zeros(one);
        CHECK_THAT(error_of([&] { F::batch_norm(t, Tensor(), Tensor(), Tensor(), Tensor(), true); }),
                   Contains("Expected more than 1 value per channel when training") && Contains(xg::shape_str(one)));
        CHECK_THAT(error_of([&] { F::batch_norm_composed(t, Tensor(), Tensor(), Tensor(), Tensor(), true); }),
                   Contains("Expected more than 1 value per channel when training"));
    }
    // One value per channel is fine in eval mode (running statistics are used).
    CHECK_NOTHROW(F::batch_norm(xg::zeros({1, 4}), xg::zeros({4}), xg::ones({4}), Tensor(), Tensor(), false));
}

}  // namespace xg_test_modules_fused_invariants
