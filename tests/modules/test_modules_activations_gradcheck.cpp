// Finite-difference checks of the ReLU, Tanh and Sigmoid modules (issue 13).
#include <cmath>
#include <limits>

#include <catch2/catch.hpp>

#include "core/ops/ops.hpp"
#include "core/tools/gradcheck.hpp"
#include "nn/nn.hpp"
#include "tests/support/gradcheck_support.hpp"

namespace xg_test_modules_activations_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using Inputs = std::vector<Tensor>;
using xg::test::randn_leaf;
constexpr auto check = xg::test::check_gradient;

namespace {

// A leaf with values moved at least `gap` away from each of `kinks` (probes of 1e-6 never cross).
Tensor leaf_avoiding(const Shape& shape, std::uint64_t seed, std::initializer_list<double> kinks, double gap = 0.1) {
    Tensor t = randn_leaf(shape, seed, 1.5);
    for (double& v : t.mutable_value()) {
        for (double k : kinks) {
            if (std::fabs(v - k) < gap) v = k + (v >= k ? gap : -gap);
        }
    }
    return t;
}

// sum(y * fixed random weights), so every output element reaches the scalar with its own weight.
Tensor weighted(const Tensor& y) {
    Generator gen(99);
    return sum(y * Tensor(randn(y.shape(), gen).value()));
}

}  // namespace

TEST_CASE("gradcheck ReLU, Tanh and Sigmoid modules", "[gradcheck][nn]") {
    nn::ReLU relu_module;
    nn::Tanh tanh_module;
    nn::Sigmoid sigmoid_module;
    const Tensor x = leaf_avoiding({2, 3, 4}, 319, {0.0});
    check([&](const Inputs& in) { return weighted(relu_module.forward(in[0])); }, {x}, "ReLU module");
    check([&](const Inputs& in) { return weighted(tanh_module.forward(in[0])); }, {x}, "Tanh module");
    check([&](const Inputs& in) { return weighted(sigmoid_module.forward(in[0])); }, {x}, "Sigmoid module");
}

}  // namespace xg_test_modules_activations_gradcheck
