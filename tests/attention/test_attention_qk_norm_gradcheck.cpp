// Finite-difference checks of MultiheadAttention with QK-norm (self causal, cross masked,
// unbatched) w.r.t. the inputs and every parameter.
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/tools/gradcheck.hpp"
#include "nn/nn.hpp"
#include "tests/support/gradcheck_support.hpp"

namespace xg_test_attention_qk_norm_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using namespace xg;
using Inputs = std::vector<Tensor>;
using xg::test::check_gradient;
using xg::test::randn_leaf;

namespace {

// A parameter of a module: the module and the name it registered the parameter under.
using Slot = std::pair<nn::Module*, std::string>;

Tensor registered(const Slot& slot) {
    for (const auto& [n, t] : slot.first->named_parameters(false)) {
        if (n == slot.second) return t;
    }
    throw std::logic_error("no parameter " + slot.second);
}

// Checks forward(inputs) w.r.t. the inputs and the parameters in `slots` (gradcheck's copies are
// put in their place for each forward, and the originals restored after).
void check_module(const std::string& name, const std::function<Tensor(const Inputs&)>& forward, Inputs inputs,
                  const std::vector<Slot>& slots) {
    const std::size_t n = inputs.size();
    std::vector<Tensor> saved;
    for (const Slot& s : slots) {
        saved.push_back(registered(s));
        inputs.emplace_back(saved.back().value(), true);
    }
    auto f = [&](const Inputs& in) {
        for (std::size_t i = 0; i < slots.size(); ++i) slots[i].first->replace_parameter(slots[i].second, in[n + i]);
        return forward(Inputs(in.begin(), in.begin() + static_cast<long>(n)));
    };
    check_gradient(f, inputs, name);
    for (std::size_t i = 0; i < slots.size(); ++i) slots[i].first->replace_parameter(slots[i].second, saved[i]);
}

void perturb(nn::Module& m, std::uint64_t seed) {
    Generator gen(seed);
    for (Tensor& p : m.parameters()) {
        for (double& v : p.mutable_value()) v += 0.5 * gen.normal();
    }
}

}  // namespace

TEST_CASE("gradcheck MultiheadAttention with qk_norm (self causal, cross masked, unbatched)", "[gradcheck][nn]") {
    nn::MultiheadAttention mha(nn::MultiheadAttentionOptions(4, 2).qk_norm(true));
    perturb(mha, 51);
    const std::vector<Slot> params{{&mha, "in_proj_weight"},  {&mha, "in_proj_bias"},      {mha.out_proj.get(), "weight"},
                                   {mha.out_proj.get(), "bias"}, {mha.q_norm.get(), "weight"}, {mha.q_norm.get(), "bias"},
                                   {mha.k_norm.get(), "weight"}, {mha.k_norm.get(), "bias"}};
    check_module("MHA qk_norm self causal", [&](const Inputs& in) { return mha.forward(in[0], in[0], in[0], true); },
                 {randn_leaf({2, 3, 4}, 52)}, params);
    check_module("MHA qk_norm unbatched", [&](const Inputs& in) { return mha.forward(in[0]); }, {randn_leaf({3, 4}, 53)}, params);
    Mask mask = Mask::from_shape({2, 3});
    mask(0, 0) = false, mask(0, 1) = true, mask(0, 2) = false, mask(1, 0) = true, mask(1, 1) = false, mask(1, 2) = false;
    check_module("MHA qk_norm cross masked", [&](const Inputs& in) { return mha.forward(in[0], in[1], in[2], &mask); },
                 {randn_leaf({2, 2, 4}, 54), randn_leaf({2, 3, 4}, 55), randn_leaf({2, 3, 4}, 56)}, params);
}

}  // namespace xg_test_attention_qk_norm_gradcheck
