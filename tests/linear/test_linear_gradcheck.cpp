// Finite-difference checks of linear and linear_composed (2-D, 3-D, 1-D input, no bias).
// Finite-difference checks of the Linear, Embedding and Dropout modules w.r.t. the input and every
// parameter. f() puts gradcheck's own input tensors in the parameters' place (replace_parameter).
// Finite-difference check of Embedding with padding_idx (issue 13).
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/engine/random.hpp"
#include "core/ops/ops.hpp"
#include "core/tools/gradcheck.hpp"
#include "nn/functional/functional.hpp"
#include "nn/nn.hpp"
#include "tests/support/gradcheck_support.hpp"
#include "tests/support/module_gradcheck.hpp"

namespace xg_test_linear_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using xg::Shape;
using xg::Tensor;
constexpr auto check = xg::test::check_gradient;

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

using namespace xg;
using Inputs = std::vector<Tensor>;
using xg::test::randn_leaf;

constexpr auto report = xg::test::expect_passed;

namespace {

using xg::test::check_module;
using xg::test::Slot;
using xg::test::perturb;

}  // namespace

TEST_CASE("gradcheck Linear (2-D, 3-D, no bias)", "[gradcheck][nn]") {
    nn::Linear lin(4, 3);
    check_module("Linear 2-D", [&](const Tensor& x) { return lin.forward(x); }, randn_leaf({2, 4}, 1), {{&lin, "weight"}, {&lin, "bias"}});
    check_module("Linear 3-D", [&](const Tensor& x) { return lin.forward(x); }, randn_leaf({2, 3, 4}, 2), {{&lin, "weight"}, {&lin, "bias"}});
    nn::Linear no_bias(4, 2, false);
    check_module("Linear no bias", [&](const Tensor& x) { return no_bias.forward(x); }, randn_leaf({3, 4}, 3), {{&no_bias, "weight"}});
}

TEST_CASE("gradcheck Embedding w.r.t. its weight (repeated indices)", "[gradcheck][nn]") {
    nn::Embedding emb(5, 3);
    const IndexArray idx{{0, 3, 3}, {4, 0, 3}};
    auto f = [&](const Inputs& in) {
        emb.replace_parameter("weight", in[0]);
        return emb.forward(idx);
    };
    report(gradcheck(f, {Tensor(emb.weight.value(), true)}, {"Embedding"}));
}

TEST_CASE("gradcheck Dropout with a fixed seed inside f", "[gradcheck][nn]") {
    nn::Dropout drop(0.4);
    auto f = [&](const Inputs& in) {
        manual_seed(123);  // the same mask on every evaluation
        return drop.forward(in[0]);
    };
    report(gradcheck(f, {randn_leaf({3, 4}, 23)}, {"Dropout train"}));
    drop.eval();
    report(gradcheck(f, {randn_leaf({3, 4}, 24)}, {"Dropout eval"}));
}

namespace {

// sum(y * fixed random weights), so every output element reaches the scalar with its own weight.
Tensor weighted(const Tensor& y) {
    Generator gen(99);
    return sum(y * Tensor(randn(y.shape(), gen).value()));
}

}  // namespace

TEST_CASE("gradcheck Embedding with padding_idx", "[gradcheck][nn]") {
    // The padding row's gradient is zero by definition (PyTorch's rule), not by calculus, so that
    // row is a constant here; the other four rows are the checked input. (That the padding row
    // gets exactly zero is tested against PyTorch in tests/linear/test_linear.cpp.)
    const IndexArray idx{{0, 2, 3}, {2, 4, 0}};
    const Tensor padding_row = randn_leaf({1, 3}, 334).detach();
    auto f = [&](const Inputs& in) {
        const Tensor weight = cat({narrow(in[0], 0, 0, 2), padding_row, narrow(in[0], 0, 2, 2)}, 0);
        return weighted(nn::functional::embedding(idx, weight, 2));
    };
    check(f, {randn_leaf({4, 3}, 327)}, "embedding padding_idx 2");
}

}  // namespace xg_test_linear_gradcheck
