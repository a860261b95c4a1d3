// Finite-difference checks of gelu (erf and tanh) and its composed twin, and of the GELU module
// (exact and tanh).
#include <string>

#include <catch2/catch.hpp>

#include "core/engine/random.hpp"
#include "nn/nn.hpp"
#include "tests/support/gradcheck_cases.hpp"

namespace xg_test_gelu_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using namespace xg::test::gradcheck_cases;

TEST_CASE("gradcheck gelu (erf and tanh) and gelu_composed", "[gradcheck][fused]") {
    Generator gen(12);
    for (const Shape& xs : {Shape{3, 4}, Shape{2, 3, 4}}) {
        Tensor x = randn(xs, gen);
        x.mutable_value() *= 2.0;
        x.requires_grad_();
        const std::string dims = shape_str(xs);
        for (auto mode : {F::GeluApproximate::none, F::GeluApproximate::tanh}) {
            const std::string tag = mode == F::GeluApproximate::none ? "" : " tanh";
            check_fused_and_composed("gelu", tag + " " + dims, [mode](const Inputs& t) { return F::gelu(t[0], mode); },
                                     [mode](const Inputs& t) { return F::gelu_composed(t[0], mode); }, {x});
        }
    }
}

TEST_CASE("gradcheck GELU (exact and tanh)", "[gradcheck][nn]") {
    nn::GELU exact, approx(F::GeluApproximate::tanh);
    check_forward("GELU none 3-D", exact, randn_leaf({2, 3, 4}, 4, 2.0), {});
    check_forward("GELU tanh 2-D", approx, randn_leaf({3, 4}, 5, 2.0), {});
}

}  // namespace xg_test_gelu_gradcheck
