// layer_norm and layer_norm_composed against PyTorch golden values (tests/fixtures/README.md):
// outputs and gradients of sum(out * grad_out), 1-D and 2-D normalized_shape, rows of mean 1e6.
// LayerNorm over an image's (C, H, W) against PyTorch golden values (tests/fixtures/README.md).
#include <algorithm>
#include <functional>
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/engine/random.hpp"
#include "nn/functional/functional.hpp"
#include "nn/modules/image_norm.hpp"
#include "nn/modules/norm_layers.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/golden.hpp"

namespace xg_test_layer_norm_golden {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using xg::Array;
using xg::Shape;
using xg::Tensor;
using xg::test::fixture;

namespace {

using namespace xg::test::golden;  // Golden, load, twin, kTol

}  // namespace

TEST_CASE("layer_norm matches PyTorch (1-D, 2-D normalized_shape, mean 1e6)", "[fused][golden]") {
    struct Case { const char* name; Shape normalized; double tol; };
    // README: ~1e-9 for the large-mean rows (x itself carries ~1e-10 absolute rounding at 1e6).
    for (const Case& k : {Case{"layernorm_1d", {8}, kTol}, Case{"layernorm_2d", {4, 8}, kTol},
                          Case{"layernorm_large_mean", {8}, 1e-9}}) {
        for (bool composed : {false, true}) {
            Golden g{std::string(k.name) + twin(composed), k.tol};
            Tensor x = load(k.name, "x"), w = load(k.name, "weight"), b = load(k.name, "bias");
            Tensor y = composed ? F::layer_norm_composed(x, k.normalized, w, b) : F::layer_norm(x, k.normalized, w, b);
            y.backward(load(k.name, "grad_out", false));
            g.expect(y.value(), "out");
            g.expect(x.grad_value(), "grad_x");
            g.expect(w.grad_value(), "grad_weight");
            g.expect(b.grad_value(), "grad_bias");
        }
    }
}

using namespace xg;
using xg::test::leaf;
using xg::test::expect_close;
using test::fixture;

TEST_CASE("LayerNorm over (C, H, W) matches PyTorch", "[norm][golden]") {
    const std::string fx = "layernorm_chw";
    nn::LayerNorm ln(Shape{3, 4, 5});
    ln.load_state_dict({{"weight", fixture(fx, "weight")}, {"bias", fixture(fx, "bias")}});
    Tensor x = leaf(fx, "x");
    Tensor y = ln.forward(x);
    y.backward(Tensor(fixture(fx, "grad_out")));
    expect_close("LayerNorm (C, H, W) out", y.value(), fixture(fx, "out"));
    expect_close("LayerNorm (C, H, W) grad_x", x.grad_value(), fixture(fx, "grad_x"));
    expect_close("LayerNorm (C, H, W) grad_weight", ln.weight.grad_value(), fixture(fx, "grad_weight"));
    expect_close("LayerNorm (C, H, W) grad_bias", ln.bias.grad_value(), fixture(fx, "grad_bias"));
}

}  // namespace xg_test_layer_norm_golden
