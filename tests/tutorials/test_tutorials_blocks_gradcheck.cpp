// Finite-difference checks of the tutorials' own blocks (tutorials/common/): the Transformer
// block's norm placements (tutorial 17), LayerNorm's projection and scaling parts, and tutorial
// 13's recurrent BatchNorm LSTM cell (tutorials/common/batch_norm_lstm.hpp).
#include <cstdio>
#include <functional>
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/tools/gradcheck.hpp"
#include "nn/modules/recurrent.hpp"
#include "nn/nn.hpp"
#include "tests/support/gradcheck_support.hpp"
#include "tests/support/module_gradcheck.hpp"
#include "tutorials/common/batch_norm_lstm.hpp"
#include "tutorials/common/blocks.hpp"

namespace xg_test_tutorials_blocks_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using Inputs = std::vector<Tensor>;
using xg::test::randn_leaf;

constexpr auto report = xg::test::expect_passed;

namespace {

using xg::test::check_module;
using xg::test::Slot;
using xg::test::perturb;

}  // namespace

// Tutorial 17: every norm placement of the Transformer block (w.r.t. the input, the norms' weights
// and biases, and the projections DeepNorm rescales), and Brody et al.'s two halves of LayerNorm.
TEST_CASE("gradcheck the Transformer block's norm placements (post, pre, peri, deepnorm, pre_lns)", "[gradcheck][nn]") {
    using tutorial_values::NormPlacement;
    for (NormPlacement p : {NormPlacement::post, NormPlacement::pre, NormPlacement::peri, NormPlacement::deepnorm,
                            NormPlacement::pre_lns}) {
        manual_seed(41);
        tutorial_values::TransformerBlock block(4, 2, p, 2, 3);
        perturb(block, 42);
        std::vector<Slot> slots{{block.norm1.get(), "weight"}, {block.norm2.get(), "bias"},
                                {block.attn.get(), "in_proj_weight"}, {block.attn->out_proj.get(), "weight"}};
        if (block.norm1_out) slots.insert(slots.end(), {{block.norm1_out.get(), "weight"}, {block.norm2_out.get(), "bias"}});
        check_module(tutorial_values::placement_name(p) + " block (d 4, 2 heads, block 2 of 3)",
                     [&](const Tensor& x) { return block.forward(x); }, randn_leaf({2, 3, 4}, 43), slots);
    }
}

TEST_CASE("gradcheck LayerNorm's projection and scaling parts (MeanProjection, SphereScaling)", "[gradcheck][nn]") {
    tutorial_values::MeanProjection projection;
    tutorial_values::SphereScaling scaling;
    report(gradcheck([&](const Inputs& in) { return projection.forward(in[0]); }, {randn_leaf({3, 5}, 44)},
                     {"MeanProjection (3, 5)"}));
    report(gradcheck([&](const Inputs& in) { return scaling.forward(in[0]); }, {randn_leaf({2, 3, 5}, 45)},
                     {"SphereScaling (2, 3, 5)"}));
    // Together they are LayerNorm without affine: sqrt(d) P x / sqrt(||P x||^2 + d eps).
    const Tensor x = randn_leaf({3, 5}, 46);
    nn::LayerNorm ln(5, 1e-5, false);
    const Array both = scaling.forward(projection.forward(x)).value(), reference = ln.forward(x).value();
    for (std::size_t i = 0; i < both.size(); ++i) CHECK(both.data()[i] == Approx(reference.data()[i]).epsilon(1e-12));
}

namespace F = xg::nn::functional;
using test::randn_leaf;
constexpr auto check = test::check_gradient;

namespace {

// A module's parameters by dotted name. To differentiate w.r.t. them, f() puts gradcheck's own
// input tensors in their place (Module::replace_parameter, as tests/linear/test_linear_gradcheck.cpp).
std::vector<std::string> slots(const nn::Module& m) {
    std::vector<std::string> names;
    for (const auto& entry : m.named_parameters()) names.push_back(entry.first);
    return names;
}

// `leading` inputs, then copies of the module's parameter values as further gradcheck inputs.
Inputs with_slots(Inputs leading, const nn::Module& m) {
    for (const auto& entry : m.named_parameters()) leading.emplace_back(entry.second.value(), true);
    return leading;
}

void point_slots(nn::Module& m, const std::vector<std::string>& names, const Inputs& in, std::size_t first) {
    for (std::size_t i = 0; i < names.size(); ++i) m.replace_parameter(names[i], in[first + i]);
}

// Sum of the tensors' elements weighted by fixed random values, so every output element matters.
Tensor weighted(const std::vector<Tensor>& outputs) {
    Tensor total;
    std::uint64_t seed = 100;
    for (const Tensor& t : outputs) {
        const Tensor term = sum(t * randn_leaf(t.shape(), seed++).detach());
        total = total.defined() ? total + term : term;
    }
    return total;
}

}  // namespace

TEST_CASE("gradcheck BatchNormLSTMCell of tutorial 13 through 3 steps, training and evaluation", "[gradcheck][recurrent]") {
    // Batch 4: in training each step normalises over the batch, so every sample's gradient
    // reaches every other's. Gains and biases moved off their initial values; a random initial
    // state, so that BN(W_hh h) at step 0 is not the normalisation of a constant.
    tutorial_values::BatchNormLSTMCell cell(3, 2, 2, 0.1);  // 2 steps of statistics: step 2 shares step 1's
    for (Tensor& p : cell.parameters()) p.mutable_value() += randn_leaf(p.shape(), 28, 0.3).value();
    const std::vector<std::string> params = slots(cell);
    const auto unrolled = [&](const Inputs& t) {
        point_slots(cell, params, t, 3);
        nn::LSTMState s{t[1], t[2]};
        std::vector<Tensor> hs;
        for (std::size_t step = 0; step < 3; ++step) {
            s = cell.forward(squeeze(narrow(t[0], 0, step, 1), 0), s, step);
            hs.push_back(s.h);
        }
        hs.push_back(s.c);
        return weighted(hs);
    };
    const Inputs inputs = with_slots({randn_leaf({3, 4, 3}, 29), randn_leaf({4, 2}, 30), randn_leaf({4, 2}, 31)}, cell);
    check(unrolled, inputs, "BatchNormLSTMCell training (batch statistics), 3 steps");
    cell.eval();  // now the running statistics each step accumulated above
    check(unrolled, inputs, "BatchNormLSTMCell evaluation (running statistics), 3 steps");
}

}  // namespace xg_test_tutorials_blocks_gradcheck
