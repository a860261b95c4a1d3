// Finite-difference checks of the tutorials' own blocks (tutorials/common/): the Transformer
// block's norm placements (tutorial 17), LayerNorm's projection and scaling parts, and tutorial
// 13's recurrent BatchNorm LSTM cell (tutorials/common/batch_norm_lstm.hpp).
#include <string>

#include <catch2/catch.hpp>

#include "nn/modules/recurrent.hpp"
#include "nn/nn.hpp"
#include "tests/support/gradcheck_cases.hpp"
#include "tutorials/common/batch_norm_lstm.hpp"
#include "tutorials/common/blocks.hpp"

namespace xg_test_tutorials_blocks_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using namespace xg::test::gradcheck_cases;

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
        check_forward(tutorial_values::placement_name(p) + " block (d 4, 2 heads, block 2 of 3)", block, randn_leaf({2, 3, 4}, 43),
                      slots);
    }
}

TEST_CASE("gradcheck LayerNorm's projection and scaling parts (MeanProjection, SphereScaling)", "[gradcheck][nn]") {
    tutorial_values::MeanProjection projection;
    tutorial_values::SphereScaling scaling;
    expect_passed(gradcheck([&](const Inputs& in) { return projection.forward(in[0]); }, {randn_leaf({3, 5}, 44)},
                            {"MeanProjection (3, 5)"}));
    expect_passed(gradcheck([&](const Inputs& in) { return scaling.forward(in[0]); }, {randn_leaf({2, 3, 5}, 45)},
                            {"SphereScaling (2, 3, 5)"}));
    // Together they are LayerNorm without affine: sqrt(d) P x / sqrt(||P x||^2 + d eps).
    const Tensor x = randn_leaf({3, 5}, 46);
    nn::LayerNorm ln(5, 1e-5, false);
    const Array both = scaling.forward(projection.forward(x)).value(), reference = ln.forward(x).value();
    for (std::size_t i = 0; i < both.size(); ++i) CHECK(both.data()[i] == Approx(reference.data()[i]).epsilon(1e-12));
}

TEST_CASE("gradcheck BatchNormLSTMCell of tutorial 13 through 3 steps, training and evaluation", "[gradcheck][recurrent]") {
    // Batch 4: in training each step normalises over the batch, so every sample's gradient
    // reaches every other's. Gains and biases moved off their initial values; a random initial
    // state, so that BN(W_hh h) at step 0 is not the normalisation of a constant.
    tutorial_values::BatchNormLSTMCell cell(3, 2, 2, 0.1);  // 2 steps of statistics: step 2 shares step 1's
    for (Tensor& p : cell.parameters()) p.mutable_value() += randn_leaf(p.shape(), 28, 0.3).value();
    const auto unrolled = [&](const Inputs& t) {
        nn::LSTMState s{t[1], t[2]};
        std::vector<Tensor> hs;
        for (std::size_t step = 0; step < 3; ++step) {
            s = cell.forward(squeeze(narrow(t[0], 0, step, 1), 0), s, step);
            hs.push_back(s.h);
        }
        hs.push_back(s.c);
        return weighted_total(hs);
    };
    const Inputs inputs{randn_leaf({3, 4, 3}, 29), randn_leaf({4, 2}, 30), randn_leaf({4, 2}, 31)};
    check_module("BatchNormLSTMCell training (batch statistics), 3 steps", unrolled, inputs, every_parameter(cell));
    cell.eval();  // now the running statistics each step accumulated above
    check_module("BatchNormLSTMCell evaluation (running statistics), 3 steps", unrolled, inputs, every_parameter(cell));
}

}  // namespace xg_test_tutorials_blocks_gradcheck
