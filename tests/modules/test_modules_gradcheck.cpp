// Finite-difference checks of a small Pre-LN model end to end (Sequential, ModuleList, residuals;
// tests/support/mini_model.hpp). f() puts gradcheck's own input tensors in the parameters' place.
#include <catch2/catch.hpp>

#include "nn/nn.hpp"
#include "tests/support/gradcheck_cases.hpp"
#include "tests/support/mini_model.hpp"

namespace xg_test_modules_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using namespace xg::test::gradcheck_cases;

TEST_CASE("gradcheck a small Pre-LN model end to end (Sequential, ModuleList, residuals)", "[gradcheck][nn]") {
    manual_seed(35);
    xg::test::MiniPreLNModel model(4, 2, 5);
    const IndexArray target{1, 4, 0, 2};
    auto f = [&](const Inputs& in) { return nn::cross_entropy(reshape(model.forward(in[0]), {-1, 5}), target); };
    expect_passed(gradcheck(f, {randn_leaf({2, 2, 4}, 36)}, {"mini Pre-LN model + cross_entropy"}));
}

}  // namespace xg_test_modules_gradcheck
