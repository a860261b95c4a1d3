// Finite-difference checks of layer_norm and its composed twin, and of the LayerNorm and RMSNorm
// modules, w.r.t. the input and every parameter, on 2-D and 3-D inputs and a joint normalized_shape.
// A module's forward reads its parameters from members; f() puts gradcheck's own input tensors in
// their place (Module::replace_parameter).
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

namespace xg_test_layer_norm_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using xg::Shape;
using xg::Tensor;
constexpr auto check = xg::test::check_gradient;

constexpr auto around = xg::test::parameter_around;

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

using namespace xg;
using Inputs = std::vector<Tensor>;
using xg::test::randn_leaf;

constexpr auto report = xg::test::expect_passed;

namespace {

using xg::test::check_module;
using xg::test::Slot;
using xg::test::perturb;

}  // namespace

TEST_CASE("gradcheck LayerNorm and RMSNorm (2-D, 3-D, joint normalized_shape)", "[gradcheck][nn]") {
    nn::LayerNorm ln(5);
    perturb(ln, 6);
    check_module("LayerNorm 2-D", [&](const Tensor& x) { return ln.forward(x); }, randn_leaf({3, 5}, 7), {{&ln, "weight"}, {&ln, "bias"}});
    check_module("LayerNorm 3-D", [&](const Tensor& x) { return ln.forward(x); }, randn_leaf({2, 2, 5}, 8), {{&ln, "weight"}, {&ln, "bias"}});
    nn::LayerNorm ln2(Shape{2, 3});
    perturb(ln2, 9);
    check_module("LayerNorm (2,3)", [&](const Tensor& x) { return ln2.forward(x); }, randn_leaf({2, 2, 3}, 10), {{&ln2, "weight"}, {&ln2, "bias"}});
    nn::LayerNorm plain(4, 1e-5, false);
    check_module("LayerNorm no affine", [&](const Tensor& x) { return plain.forward(x); }, randn_leaf({3, 4}, 11), {});

    nn::RMSNorm rms(5);
    perturb(rms, 12);
    check_module("RMSNorm 2-D", [&](const Tensor& x) { return rms.forward(x); }, randn_leaf({3, 5}, 13), {{&rms, "weight"}});
    check_module("RMSNorm 3-D", [&](const Tensor& x) { return rms.forward(x); }, randn_leaf({2, 2, 5}, 14), {{&rms, "weight"}});
}

}  // namespace xg_test_layer_norm_gradcheck
