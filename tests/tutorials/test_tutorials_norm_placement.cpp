// Tutorial 17's computations on tiny settings (the guide-drift test in test_tutorials.cpp runs the
// quick program): the placements' blocks, the layer-removal and residual measurements, Li and
// Arora's equivalence, and the majority task's unselectable keys.
#include <cmath>

#include <catch2/catch.hpp>

#include "core/ops/ops.hpp"
#include "core/engine/random.hpp"
#include "tutorials/17_norm_placement/norm_placement.hpp"
#include "tutorials/common/tutorial.hpp"

namespace xg_test_tutorials_norm_placement {  // one namespace per test file: the files are compiled in batches

namespace tv = tutorial_values;
using tv::NormPlacement;

TEST_CASE("P4.1 P5.1 P6.1: each placement computes its formula", "[tutorials]") {
    xg::manual_seed(7);
    const xg::Tensor x = xg::randn({2, 3, 4});
    tv::TransformerBlock pre(4, 2, NormPlacement::pre, 4, 6), lns(4, 2, NormPlacement::pre_lns, 4, 6);
    lns.load_state_dict(pre.state_dict());
    // LNS divides both norms' outputs by sqrt(4) = 2: the same as halving the norms' weights and biases.
    for (auto& norm : {pre.norm1, pre.norm2}) {
        for (xg::Tensor& p : norm->parameters()) p.mutable_value() *= 0.5;
    }
    CHECK(xg::tutorial::max_abs_diff(lns.forward(x).value(), pre.forward(x).value()) < 1e-12);
    CHECK(lns.norm_scale == Approx(0.5));

    tv::TransformerBlock dn(4, 2, NormPlacement::deepnorm, 1, 6);
    CHECK(dn.residual_weight == Approx(std::pow(12.0, 0.25)));
    CHECK_FALSE(dn.pre_ln);
    CHECK(dn.norm1_out == nullptr);
    // Peri-LN's output norms make each branch's contribution LayerNorm-normalised: with the
    // output norms' weights zeroed the block is the identity.
    tv::TransformerBlock peri(4, 2, NormPlacement::peri, 2, 6);
    REQUIRE(peri.norm1_out != nullptr);
    for (auto& norm : {peri.norm1_out, peri.norm2_out}) {
        for (xg::Tensor& p : norm->parameters()) p.mutable_value().fill(0.0);
    }
    CHECK(xg::tutorial::max_abs_diff(peri.forward(x).value(), x.value()) < 1e-15);
    CHECK_THROWS_AS(tv::TransformerBlock(4, 2, NormPlacement::pre, 0, 6), xg::Error);
    CHECK_THROWS_AS(tv::TransformerBlock(4, 2, NormPlacement::pre, 7, 6), xg::Error);
    for (auto p : {NormPlacement::post, NormPlacement::pre, NormPlacement::peri, NormPlacement::deepnorm, NormPlacement::pre_lns}) {
        INFO(tv::placement_name(p));
        CHECK(tv::placement_gradcheck(p).ok);
    }
}

TEST_CASE("P4.1 P5.1 P6.1: the placement study runs end to end (tiny)", "[tutorials][experiments]") {
    tv::PlacementConfig cfg;
    cfg.d_model = 8;
    cfg.n_heads = 2;
    cfg.context = 8;
    cfg.batch = 2;
    cfg.steps = 2;
    cfg.warmup = 1;
    cfg.depths = {2, 3};
    cfg.seeds = {1, 2};
    cfg.heldout_windows = 4;
    cfg.progress = false;
    const tv::PlacementStudy s = tv::placement_study(cfg);
    REQUIRE(s.cells.size() == 10);
    for (const auto& c : s.cells) {
        INFO(tv::placement_name(c.placement) << ", " << c.depth << " blocks");
        REQUIRE(c.runs.size() == 2);
        for (const auto& r : c.runs) {
            CHECK(std::isfinite(r.heldout));
            CHECK(r.variance.size() == c.depth);
            CHECK(r.grad_init.size() == c.depth);
            CHECK(r.removal.size() == c.depth);
            CHECK(r.max_activation > 0.0);
            for (double g : r.grad_init) CHECK(g > 0.0);
        }
        // Post-LN and DeepNorm end every block in a LayerNorm (weight 1, bias 0 at init): unit variance.
        if (c.placement == NormPlacement::post || c.placement == NormPlacement::deepnorm) {
            CHECK(c.runs[0].variance_init.back() == Approx(1.0).epsilon(1e-3));
        }
    }
}

TEST_CASE("P7.1: weight decay and the exponential learning rate give the same directions when eps = 0", "[tutorials]") {
    tv::ScaleInvarianceConfig c;
    c.steps = 40;
    const tv::Equivalence exact = tv::li_arora(c, 0.0);
    CHECK(exact.max_direction_gap < 1e-11);
    CHECK(exact.max_loss_gap < 1e-11);
    const tv::EquivalenceRow& last = exact.rows.back();
    CHECK(last.step == 40);
    CHECK(last.norm_schedule == Approx(last.norm_wd * std::pow(1 - c.lr * c.weight_decay, -40.0)).epsilon(1e-9));
    CHECK(last.loss_wd < exact.rows.front().loss_wd);  // it trains
    // With eps > 0 the loss is no longer scale invariant: the runs part, far above rounding.
    c.weight_decay = 0.5;
    CHECK(tv::li_arora(c, 1e-1).max_direction_gap > 1e-6);
}

TEST_CASE("P8.1: keys on a sphere are all selectable, a key inside the others' hull never is", "[tutorials]") {
    xg::Array square{{1.0, 0.0}, {0.0, 1.0}, {-1.0, 0.0}, {0.0, -1.0}, {0.1, 0.1}};
    CHECK(tv::count_unselectable(square, 2000, 3) == 1);
    tv::SphereScaling scaling(0.0);
    const xg::Array on_sphere = scaling.forward(xg::Tensor(square)).value();
    CHECK(tv::count_unselectable(on_sphere, 2000, 3) == 0);
    tv::MajorityConfig c;
    c.steps = 3;
    c.test_sequences = 20;
    c.queries = 100;
    c.seeds = {1, 2};
    const auto variants = tv::majority_ablation(c);
    REQUIRE(variants.size() == 4);
    for (const auto& v : variants) {
        INFO(tv::majority_norm_name(v.norm));
        REQUIRE(v.accuracy.size() == 2);
        CHECK(v.accuracy[0] >= 0.0);
        CHECK(v.accuracy[0] <= 1.0);
        CHECK(v.unselectable[0] < c.vocab);
    }
}

}  // namespace xg_test_tutorials_norm_placement
