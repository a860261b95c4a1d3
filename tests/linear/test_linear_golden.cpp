// linear and linear_composed against PyTorch golden values (tests/fixtures/README.md).
// Embedding against PyTorch golden values: repeated indices accumulate their gradients.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "nn/functional/functional.hpp"
#include "nn/nn.hpp"
#include "tests/support/attention_reference.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/golden.hpp"

namespace xg_test_linear_golden {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using xg::Array;
using xg::Shape;
using xg::Tensor;
using xg::test::fixture;

namespace {

using namespace xg::test::golden;  // Golden, load, twin, kTol

}  // namespace

TEST_CASE("linear matches PyTorch", "[fused][golden]") {
    for (bool composed : {false, true}) {
        Golden g{std::string("linear") + twin(composed)};
        Tensor x = load("linear", "x"), w = load("linear", "weight"), b = load("linear", "bias");
        Tensor y = composed ? F::linear_composed(x, w, b) : F::linear(x, w, b);
        y.backward(load("linear", "grad_out", false));
        g.expect(y.value(), "out");
        g.expect(x.grad_value(), "grad_x");
        g.expect(w.grad_value(), "grad_weight");
        g.expect(b.grad_value(), "grad_bias");
    }
}

using namespace xg;
using xg::test::expect_close;
using test::attention_reference;
using test::fixture;
using test::max_rel_diff;

namespace {

// Backpropagates sum(out * grad_out) (the fixtures' convention for non-scalar outputs).
void backward_with(const Tensor& out, const Array& grad_out) { out.backward(Tensor(grad_out)); }

}  // namespace

TEST_CASE("Embedding matches PyTorch, repeated indices accumulate", "[nn][golden]") {
    const std::string fx = "embedding";
    nn::Embedding emb(7, 3);
    emb.load_state_dict({{"weight", fixture(fx, "weight")}});
    const Tensor out = emb.forward(test::fixture_index(fx, "indices"));
    expect_close("embedding out", out.value(), fixture(fx, "out"));
    backward_with(out, fixture(fx, "grad_out"));
    expect_close("embedding grad_weight", emb.weight.grad_value(), fixture(fx, "grad_weight"));
}

}  // namespace xg_test_linear_golden
