// The Linear, GELU, LayerNorm and RMSNorm modules against PyTorch golden values
// (tests/fixtures/README.md); each check prints its worst relative error.
#include <cmath>
#include <cstdio>
#include <utility>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "nn/nn.hpp"
#include "tests/support/attention_reference.hpp"
#include "tests/support/fixtures.hpp"

namespace xg_test_modules_golden {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using xg::test::expect_close;
using test::attention_reference;
using test::fixture;
using test::max_rel_diff;

namespace {

// Backpropagates sum(out * grad_out) (the fixtures' convention for non-scalar outputs).
void backward_with(const Tensor& out, const Array& grad_out) { out.backward(Tensor(grad_out)); }

}  // namespace

TEST_CASE("Linear, GELU, LayerNorm and RMSNorm modules match PyTorch", "[nn][golden]") {
    {
        nn::Linear lin(5, 3);
        lin.load_state_dict({{"weight", fixture("linear", "weight")}, {"bias", fixture("linear", "bias")}});
        const Tensor x(fixture("linear", "x"), true);
        const Tensor out = lin.forward(x);
        expect_close("Linear out", out.value(), fixture("linear", "out"));
        backward_with(out, fixture("linear", "grad_out"));
        expect_close("Linear grad_x", x.grad_value(), fixture("linear", "grad_x"));
        expect_close("Linear grad_weight", lin.weight.grad_value(), fixture("linear", "grad_weight"));
        expect_close("Linear grad_bias", lin.bias.grad_value(), fixture("linear", "grad_bias"));
    }
    for (const std::string fx : {"gelu_none", "gelu_tanh"}) {
        nn::GELU gelu(fx == "gelu_tanh" ? nn::functional::GeluApproximate::tanh : nn::functional::GeluApproximate::none);
        const Tensor x(fixture(fx, "x"), true);
        const Tensor out = gelu.forward(x);
        expect_close("GELU " + fx + " out", out.value(), fixture(fx, "out"));
        backward_with(out, fixture(fx, "grad_out"));
        expect_close("GELU " + fx + " grad_x", x.grad_value(), fixture(fx, "grad_x"));
    }
    for (const std::string fx : {"layernorm_1d", "layernorm_2d"}) {
        nn::LayerNorm ln(fx == "layernorm_1d" ? Shape{8} : Shape{4, 8});
        ln.load_state_dict({{"weight", fixture(fx, "weight")}, {"bias", fixture(fx, "bias")}});
        const Tensor x(fixture(fx, "x"), true);
        const Tensor out = ln.forward(x);
        expect_close("LayerNorm " + fx + " out", out.value(), fixture(fx, "out"));
        backward_with(out, fixture(fx, "grad_out"));
        expect_close("LayerNorm " + fx + " grad_x", x.grad_value(), fixture(fx, "grad_x"));
        expect_close("LayerNorm " + fx + " grad_weight", ln.weight.grad_value(), fixture(fx, "grad_weight"));
        expect_close("LayerNorm " + fx + " grad_bias", ln.bias.grad_value(), fixture(fx, "grad_bias"));
    }
    {
        nn::RMSNorm rms(8);
        rms.load_state_dict({{"weight", fixture("rmsnorm", "weight")}});
        const Tensor x(fixture("rmsnorm", "x"), true);
        const Tensor out = rms.forward(x);
        expect_close("RMSNorm out", out.value(), fixture("rmsnorm", "out"));
        backward_with(out, fixture("rmsnorm", "grad_out"));
        expect_close("RMSNorm grad_x", x.grad_value(), fixture("rmsnorm", "grad_x"));
        expect_close("RMSNorm grad_weight", rms.weight.grad_value(), fixture("rmsnorm", "grad_weight"));
    }
}

}  // namespace xg_test_modules_golden
