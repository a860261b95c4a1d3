// Finite-difference checks of gelu (erf and tanh) and its composed twin.
// Finite-difference checks of the GELU module (exact and tanh).
#include <cstdio>
#include <functional>
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/engine/random.hpp"
#include "core/tools/gradcheck.hpp"
#include "nn/functional/functional.hpp"
#include "nn/nn.hpp"
#include "tests/support/gradcheck_support.hpp"
#include "tests/support/module_gradcheck.hpp"

namespace xg_test_gelu_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using xg::Shape;
using xg::Tensor;
constexpr auto check = xg::test::check_gradient;

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

using namespace xg;
using Inputs = std::vector<Tensor>;
using xg::test::randn_leaf;

constexpr auto report = xg::test::expect_passed;

namespace {

using xg::test::check_module;
using xg::test::Slot;
using xg::test::perturb;

}  // namespace

TEST_CASE("gradcheck GELU (exact and tanh)", "[gradcheck][nn]") {
    nn::GELU exact, approx(nn::functional::GeluApproximate::tanh);
    check_module("GELU none 3-D", [&](const Tensor& x) { return exact.forward(x); }, randn_leaf({2, 3, 4}, 4, 2.0), {});
    check_module("GELU tanh 2-D", [&](const Tensor& x) { return approx.forward(x); }, randn_leaf({3, 4}, 5, 2.0), {});
}

}  // namespace xg_test_gelu_gradcheck
