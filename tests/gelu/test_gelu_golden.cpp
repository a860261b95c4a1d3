// gelu (erf and tanh) and gelu_composed against PyTorch golden values (tests/fixtures/README.md).
#include <algorithm>
#include <functional>
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "nn/functional/functional.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/golden.hpp"

namespace xg_test_gelu_golden {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using xg::Array;
using xg::Shape;
using xg::Tensor;
using xg::test::fixture;

namespace {

using namespace xg::test::golden;  // Golden, load, twin, kTol

}  // namespace

TEST_CASE("gelu (erf and tanh) matches PyTorch", "[fused][golden]") {
    for (auto [name, mode] : {std::pair{"gelu_none", F::GeluApproximate::none}, std::pair{"gelu_tanh", F::GeluApproximate::tanh}}) {
        for (bool composed : {false, true}) {
            Golden g{std::string(name) + twin(composed)};
            Tensor x = load(name, "x");
            Tensor y = composed ? F::gelu_composed(x, mode) : F::gelu(x, mode);
            y.backward(load(name, "grad_out", false));
            g.expect(y.value(), "out");
            g.expect(x.grad_value(), "grad_x");
        }
    }
}

}  // namespace xg_test_gelu_golden
