// Finite-difference checks of batch_norm and its composed twin, train and eval.
// Finite-difference checks of the BatchNorm1d module (train and eval, 2-D and 3-D, without
// running stats). f() puts gradcheck's own input tensors in the parameters' place.
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

namespace xg_test_batch_norm_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using xg::Shape;
using xg::Tensor;
constexpr auto check = xg::test::check_gradient;
constexpr auto around = xg::test::parameter_around;

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

using namespace xg;
using Inputs = std::vector<Tensor>;
using xg::test::randn_leaf;

constexpr auto report = xg::test::expect_passed;

namespace {

using xg::test::check_module;
using xg::test::Slot;
using xg::test::perturb;

}  // namespace

TEST_CASE("gradcheck BatchNorm1d (train and eval, 2-D and 3-D, without running stats)", "[gradcheck][nn]") {
    nn::BatchNorm1d bn(3);
    perturb(bn, 15);
    {
        NoGradGuard no_grad;  // move the running stats away from (0, 1) before the eval check
        bn.forward(Tensor(randn_leaf({6, 3}, 16, 2.0, 1.0).value()));
    }
    check_module("BatchNorm1d train 2-D", [&](const Tensor& x) { return bn.forward(x); }, randn_leaf({4, 3}, 17), {{&bn, "weight"}, {&bn, "bias"}});
    check_module("BatchNorm1d train 3-D", [&](const Tensor& x) { return bn.forward(x); }, randn_leaf({3, 3, 2}, 18), {{&bn, "weight"}, {&bn, "bias"}});
    bn.eval();
    check_module("BatchNorm1d eval 2-D", [&](const Tensor& x) { return bn.forward(x); }, randn_leaf({4, 3}, 19), {{&bn, "weight"}, {&bn, "bias"}});
    check_module("BatchNorm1d eval 3-D", [&](const Tensor& x) { return bn.forward(x); }, randn_leaf({2, 3, 2}, 20), {{&bn, "weight"}, {&bn, "bias"}});
    nn::BatchNorm1d batch_only(3, 1e-5, 0.1, true, false);
    perturb(batch_only, 21);
    batch_only.eval();  // no running stats: eval normalises with the batch's statistics
    check_module("BatchNorm1d eval, no running stats", [&](const Tensor& x) { return batch_only.forward(x); }, randn_leaf({4, 3}, 22),
                 {{&batch_only, "weight"}, {&batch_only, "bias"}});
}

}  // namespace xg_test_batch_norm_gradcheck
