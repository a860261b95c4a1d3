// Finite-difference checks of the ReLU, Tanh and Sigmoid modules (issue 13).
#include <catch2/catch.hpp>

#include "nn/nn.hpp"
#include "tests/support/gradcheck_cases.hpp"

namespace xg_test_modules_activations_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using namespace xg::test::gradcheck_cases;

TEST_CASE("gradcheck ReLU, Tanh and Sigmoid modules", "[gradcheck][nn]") {
    nn::ReLU relu_module;
    nn::Tanh tanh_module;
    nn::Sigmoid sigmoid_module;
    const Tensor x = leaf_avoiding({2, 3, 4}, 319, {0.0});
    check_gradient([&](const Inputs& in) { return weighted_sum(relu_module.forward(in[0])); }, {x}, "ReLU module");
    check_gradient([&](const Inputs& in) { return weighted_sum(tanh_module.forward(in[0])); }, {x}, "Tanh module");
    check_gradient([&](const Inputs& in) { return weighted_sum(sigmoid_module.forward(in[0])); }, {x}, "Sigmoid module");
}

}  // namespace xg_test_modules_activations_gradcheck
