// Finite-difference checks of every fused op and its composed twin, w.r.t. the input and every
// parameter, on 2-D and 3-D inputs (BatchNorm in training and evaluation mode).
#include <cstdio>
#include <string>

#include <catch2/catch.hpp>

#include "core/tools/gradcheck.hpp"
#include "core/engine/random.hpp"
#include "nn/functional/functional.hpp"
#include "tests/support/gradcheck_support.hpp"

namespace xg_test_fused_ops {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using xg::Shape;
using xg::Tensor;

constexpr auto check = xg::test::check_gradient;

namespace {

// Parameters near 1 (weights) or 0 (biases) but not exactly, so every term of the backward matters.
Tensor around(double centre, const Shape& shape, xg::Generator& gen) {
    Tensor t = xg::randn(shape, gen);
    t.mutable_value() = centre + 0.5 * t.value();
    t.requires_grad_();
    return t;
}

}  // namespace

TEST_CASE("gradcheck linear and linear_composed", "[gradcheck][fused]") {
    xg::Generator gen(11);
    for (const Shape& xs : {Shape{3, 4}, Shape{2, 3, 4}, Shape{4}}) {
        Tensor x = xg::randn(xs, gen, true), w = xg::randn({5, 4}, gen, true), b = xg::randn({5}, gen, true);
        const std::string dims = xg::shape_str(xs);
        check([](const std::vector<Tensor>& t) { return F::linear(t[0], t[1], t[2]); }, {x, w, b}, "linear " + dims);
        check([](const std::vector<Tensor>& t) { return F::linear_composed(t[0], t[1], t[2]); }, {x, w, b},
              "linear_composed " + dims);
        check([](const std::vector<Tensor>& t) { return F::linear(t[0], t[1]); }, {x, w}, "linear no bias " + dims);
    }
}

TEST_CASE("gradcheck gelu (erf and tanh) and gelu_composed", "[gradcheck][fused]") {
    xg::Generator gen(12);
    for (const Shape& xs : {Shape{3, 4}, Shape{2, 3, 4}}) {
        Tensor x = xg::randn(xs, gen);
        x.mutable_value() *= 2.0;
        x.requires_grad_();
        const std::string dims = xg::shape_str(xs);
        for (auto mode : {F::GeluApproximate::none, F::GeluApproximate::tanh}) {
            const std::string tag = mode == F::GeluApproximate::none ? "" : " tanh";
            check([mode](const std::vector<Tensor>& t) { return F::gelu(t[0], mode); }, {x}, "gelu" + tag + " " + dims);
            check([mode](const std::vector<Tensor>& t) { return F::gelu_composed(t[0], mode); }, {x},
                  "gelu_composed" + tag + " " + dims);
        }
    }
}

TEST_CASE("gradcheck layer_norm and layer_norm_composed", "[gradcheck][fused]") {
    xg::Generator gen(13);
    struct Case { Shape x, normalized; };
    for (const Case& k : {Case{{3, 5}, {5}}, Case{{2, 3, 4}, {4}}, Case{{2, 3, 4}, {3, 4}}}) {
        Tensor x = xg::randn(k.x, gen, true);
        Tensor w = around(1.0, k.normalized, gen), b = around(0.0, k.normalized, gen);
        const Shape ns = k.normalized;
        const std::string dims = xg::shape_str(k.x) + " over " + xg::shape_str(ns);
        check([ns](const std::vector<Tensor>& t) { return F::layer_norm(t[0], ns, t[1], t[2]); }, {x, w, b},
              "layer_norm " + dims);
        check([ns](const std::vector<Tensor>& t) { return F::layer_norm_composed(t[0], ns, t[1], t[2]); }, {x, w, b},
              "layer_norm_composed " + dims);
        check([ns](const std::vector<Tensor>& t) { return F::layer_norm(t[0], ns); }, {x}, "layer_norm no affine " + dims);
    }
}

TEST_CASE("gradcheck rms_norm and rms_norm_composed", "[gradcheck][fused]") {
    xg::Generator gen(14);
    struct Case { Shape x, normalized; };
    for (const Case& k : {Case{{3, 5}, {5}}, Case{{2, 3, 4}, {4}}, Case{{2, 3, 4}, {3, 4}}}) {
        Tensor x = xg::randn(k.x, gen, true);
        Tensor w = around(1.0, k.normalized, gen);
        const Shape ns = k.normalized;
        const std::string dims = xg::shape_str(k.x) + " over " + xg::shape_str(ns);
        check([ns](const std::vector<Tensor>& t) { return F::rms_norm(t[0], ns, t[1]); }, {x, w}, "rms_norm " + dims);
        check([ns](const std::vector<Tensor>& t) { return F::rms_norm_composed(t[0], ns, t[1]); }, {x, w},
              "rms_norm_composed " + dims);
        check([ns](const std::vector<Tensor>& t) { return F::rms_norm(t[0], ns); }, {x}, "rms_norm no weight " + dims);
    }
}

TEST_CASE("gradcheck batch_norm and batch_norm_composed, train and eval", "[gradcheck][fused]") {
    xg::Generator gen(15);
    for (const Shape& xs : {Shape{5, 3}, Shape{4, 3, 2}}) {
        Tensor x = xg::randn(xs, gen, true);
        Tensor w = around(1.0, {3}, gen), b = around(0.0, {3}, gen);
        // Running statistics are buffers, not inputs: eval mode normalises with these constants.
        Tensor rm = xg::randn({3}, gen), rv = xg::uniform({3}, 0.5, 2.0);
        const std::string dims = xg::shape_str(xs);
        for (bool training : {true, false}) {
            const std::string mode = training ? " train " : " eval ";
            // In training the running stats change on every call but never affect the output.
            check([=](const std::vector<Tensor>& t) { return F::batch_norm(t[0], rm, rv, t[1], t[2], training); },
                  {x, w, b}, "batch_norm" + mode + dims);
            check([=](const std::vector<Tensor>& t) { return F::batch_norm_composed(t[0], rm, rv, t[1], t[2], training); },
                  {x, w, b}, "batch_norm_composed" + mode + dims);
        }
        check([](const std::vector<Tensor>& t) { return F::batch_norm(t[0], Tensor(), Tensor(), Tensor(), Tensor(), true); },
              {x}, "batch_norm no affine train " + dims);
    }
}

}  // namespace xg_test_fused_ops
