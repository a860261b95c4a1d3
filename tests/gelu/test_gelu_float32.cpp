// `ctest -L float32`: gelu (exact and tanh) and GELU in float32 against float64 (tests/support/float32_nn_twins.hpp).
#include <memory>

#include <catch2/catch.hpp>

#include "nn/functional/functional.hpp"
#include "nn/modules/activation.hpp"
#include "tests/support/float32_nn_twins.hpp"

namespace xg_test_gelu_float32 {

namespace F = xg::nn::functional;
using xg::Tensor;
using xg_test_support::NnTwinList;
using xg_test_support::twin_leaf;
using Inputs = std::vector<Tensor>;

// The conditions. y = x Phi(x): rounding x by u|x| moves y by |gelu'(x)| u |x| <= 1.13 u |x|, and for
// x ~ 2 N(0, 1) the largest |x| is a positive one (y ~ x there) or a negative one whose y is ~0 but
// no larger than max y in size: <= 1.13 * 2 u max |y| with the rounding of y: 3.3. The gradient
// g gelu'(x) reads a rounded seed (u), moves by |gelu''(x)| u |x| <= 0.8 * 3 u |g| (|x| <= ~3
// relative to where |gelu'| ~ 1) and is rounded (u): 1 + 2.4 + 1 + the value's 3.3 = 8 (tanh form alike).
NnTwinList gelu_twins() {
    const auto exact = [](const Inputs& in) { return Inputs{F::gelu(in[0])}; };
    const auto tanh_form = [](const Inputs& in) { return Inputs{F::gelu(in[0], F::GeluApproximate::tanh)}; };
    const auto exact_composed = [](const Inputs& in) { return Inputs{F::gelu_composed(in[0])}; };
    const auto tanh_composed = [](const Inputs& in) { return Inputs{F::gelu_composed(in[0], F::GeluApproximate::tanh)}; };
    const auto module = std::make_shared<xg::nn::GELU>(F::GeluApproximate::tanh);
    return {
        {"gelu (9, 40)", exact, {twin_leaf({9, 40}, 41, 2.0)}, 8},
        {"gelu tanh (9, 40)", tanh_form, {twin_leaf({9, 40}, 41, 2.0)}, 8},
        // the composed twins round 4 (erf) and 7 (tanh) intermediates more: 12 and 15
        {"gelu_composed (9, 40)", exact_composed, {twin_leaf({9, 40}, 41, 2.0)}, 12},
        {"gelu_composed tanh (9, 40)", tanh_composed, {twin_leaf({9, 40}, 41, 2.0)}, 15},
        {"GELU(tanh) (3, 5, 8)", xg_test_support::module_twin(module, [](xg::nn::Module& m, const Tensor& x) { return Inputs{m(x)}; }),
         {twin_leaf({3, 5, 8}, 42, 2.0)}, 8},
    };
}
const xg_test_support::RegisterNnTwins registered("gelu", &gelu_twins);

TEST_CASE("float32 twin: gelu and GELU agree with float64", "[float32][gelu]") { xg_test_support::run_nn_twins(gelu_twins()); }

}  // namespace xg_test_gelu_float32
