// The Linear, GELU, LayerNorm and RMSNorm modules against PyTorch golden values
// (tests/fixtures/README.md); each check prints its worst relative error.
#include <catch2/catch.hpp>

#include "nn/nn.hpp"
#include "tests/support/golden.hpp"

namespace xg_test_modules_golden {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using xg::test::golden::check_module;

TEST_CASE("Linear, GELU, LayerNorm and RMSNorm modules match PyTorch", "[nn][golden]") {
    nn::Linear lin(5, 3);
    check_module("Linear", lin, "linear");
    for (const std::string fx : {"gelu_none", "gelu_tanh"}) {
        nn::GELU gelu(fx == "gelu_tanh" ? nn::functional::GeluApproximate::tanh : nn::functional::GeluApproximate::none);
        check_module("GELU " + fx, gelu, fx);
    }
    for (const std::string fx : {"layernorm_1d", "layernorm_2d"}) {
        nn::LayerNorm ln(fx == "layernorm_1d" ? Shape{8} : Shape{4, 8});
        check_module("LayerNorm " + fx, ln, fx);
    }
    nn::RMSNorm rms(8);
    check_module("RMSNorm", rms, "rmsnorm");
}

}  // namespace xg_test_modules_golden
