// Finite-difference checks of MultiheadAttention (self and cross, with and without a causal
// mask) w.r.t. the inputs and every parameter (replace_parameter puts gradcheck's tensors in place).
#include <cstdio>
#include <functional>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/tools/gradcheck.hpp"
#include "nn/nn.hpp"
#include "tests/support/gradcheck_support.hpp"

namespace xg_test_attention_module_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

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

// Parameters and buffers are perturbed away from their trivial init so every term matters.
void perturb(nn::Module& m, std::uint64_t seed) {
    Generator gen(seed);
    for (Tensor& p : m.parameters()) {
        for (double& v : p.mutable_value()) v += 0.5 * gen.normal();
    }
}

}  // namespace

TEST_CASE("gradcheck MultiheadAttention (self and cross, with and without causal mask)", "[gradcheck][nn]") {
    nn::MultiheadAttention mha(4, 2);
    perturb(mha, 25);
    std::vector<Slot> params{{&mha, "in_proj_weight"}, {&mha, "in_proj_bias"}, {mha.out_proj.get(), "weight"}, {mha.out_proj.get(), "bias"}};
    check_module("MHA self", [&](const Tensor& x) { return mha.forward(x); }, randn_leaf({2, 3, 4}, 26), params);
    check_module("MHA self causal", [&](const Tensor& x) { return mha.forward(x, x, x, true); }, randn_leaf({2, 3, 4}, 27), params);
    check_module("MHA unbatched causal", [&](const Tensor& x) { return mha.forward(x, x, x, true); }, randn_leaf({3, 4}, 28), params);
    // Cross attention: separate query, key and value tensors, and a custom (T, S) mask.
    Mask mask = Mask::from_shape({2, 3});
    mask(0, 0) = false, mask(0, 1) = true, mask(0, 2) = false, mask(1, 0) = true, mask(1, 1) = false, mask(1, 2) = false;
    auto f = [&](const Inputs& in) { return mha.forward(in[0], in[1], in[2], &mask); };
    report(gradcheck(f, {randn_leaf({2, 2, 4}, 29), randn_leaf({2, 3, 4}, 30), randn_leaf({2, 3, 4}, 31)}, {"MHA cross, masked"}));
}

}  // namespace xg_test_attention_module_gradcheck
