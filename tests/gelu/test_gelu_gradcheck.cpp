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

// A parameter of a module: the module and the name it registered the parameter under.
using Slot = std::pair<nn::Module*, std::string>;

Tensor registered(const Slot& slot) {
    for (const auto& [n, t] : slot.first->named_parameters(false)) {
        if (n == slot.second) return t;
    }
    throw std::logic_error("no parameter " + slot.second);
}

// Checks forward(x) w.r.t. x and the parameters in `slots`, which are restored after.
void check_module(const std::string& name, const std::function<Tensor(const Tensor&)>& forward, const Tensor& x,
                  const std::vector<Slot>& slots) {
    std::vector<Tensor> saved;
    Inputs inputs{x};
    for (const Slot& s : slots) {
        saved.push_back(registered(s));
        inputs.emplace_back(saved.back().value(), true);
    }
    auto f = [&](const Inputs& in) {
        for (std::size_t i = 0; i < slots.size(); ++i) slots[i].first->replace_parameter(slots[i].second, in[i + 1]);
        return forward(in[0]);
    };
    report(gradcheck(f, inputs, {name}));
    for (std::size_t i = 0; i < slots.size(); ++i) slots[i].first->replace_parameter(slots[i].second, saved[i]);
}

}  // namespace

TEST_CASE("gradcheck GELU (exact and tanh)", "[gradcheck][nn]") {
    nn::GELU exact, approx(nn::functional::GeluApproximate::tanh);
    check_module("GELU none 3-D", [&](const Tensor& x) { return exact.forward(x); }, randn_leaf({2, 3, 4}, 4, 2.0), {});
    check_module("GELU tanh 2-D", [&](const Tensor& x) { return approx.forward(x); }, randn_leaf({3, 4}, 5, 2.0), {});
}

}  // namespace xg_test_gelu_gradcheck
