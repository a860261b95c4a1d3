// Tutorial 10 (Pre-LN vs Post-LN gradients): A2.4, A0.5, A4.3 on tiny settings. The numbers the tutorial prints,
// asserted (its guide-drift test is in test_tutorials.cpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tutorials/10_pre_vs_post_ln_gradients/prepost.hpp"
#include "tutorials/common/seed_stats.hpp"

namespace xg_test_tutorials_10_pre_vs_post_ln {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace tv = tutorial_values;

TEST_CASE("A2.4: gradient profiles read by hooks over seeds (tiny)", "[tutorials][experiments]") {
    const tv::CharCorpus corpus("/usr/share/common-licenses/GPL-3");
    const tv::GradientProfile g = tv::gradient_profile("ce_xavier", corpus, 3, 16, 1, {1, 2});
    REQUIRE(g.post_ln.size() == 3);
    REQUIRE(g.pre_ln_w2_sd.size() == 3);
    for (std::size_t l = 0; l < 3; ++l) {
        CHECK(g.post_ln[l] > 1e-3);
        CHECK(g.pre_ln[l] > 1e-3);
        CHECK(g.pre_ln_w2[l] > 0.0);
        CHECK(g.post_ln_sd[l] > 0.0);  // two seeds, two different initialisations
    }
    CHECK(g.hook_vs_grad < 1e-12);  // the hooks see exactly what .grad accumulates
    // the verdict's per-seed W2 norms: one row per seed, averaging to the printed means
    REQUIRE(g.post_ln_w2_per_seed.size() == 2);
    REQUIRE(g.pre_ln_w2_per_seed.size() == 2);
    for (std::size_t l = 0; l < 3; ++l) {
        CHECK(g.post_ln_w2[l] == Approx((g.post_ln_w2_per_seed[0][l] + g.post_ln_w2_per_seed[1][l]) / 2));
        CHECK(g.pre_ln_w2[l] == Approx((g.pre_ln_w2_per_seed[0][l] + g.pre_ln_w2_per_seed[1][l]) / 2));
    }
    const tv::GradientProfile degenerate = tv::gradient_profile("degenerate", corpus, 3, 16, 1, {1});
    for (double v : degenerate.pre_ln) CHECK(v < 1e-5);  // a ~constant loss has ~no gradient
}

TEST_CASE("A0.5 A4.3: the learning-rate x depth sweep runs and flags divergence (tiny)", "[tutorials][experiments]") {
    const tv::CharCorpus corpus("/usr/share/common-licenses/GPL-3");
    tv::SweepConfig cfg;
    cfg.lrs = {1e-3};
    cfg.depths = {1};
    cfg.seeds = {1, 2};
    cfg.steps = 3;
    cfg.warmup = 2;
    cfg.tail = 2;
    cfg.progress = false;
    const auto cells = tv::lr_depth_sweep(corpus, cfg);
    REQUIRE(cells.size() == 8);  // placement x warm-up x clipping
    for (const auto& c : cells) {
        REQUIRE(c.final_loss.size() == 2);
        for (double v : c.initial_loss) CHECK(std::fabs(v - std::log(static_cast<double>(corpus.vocab_size()))) < 0.5);
        for (std::size_t s = 0; s < 2; ++s) CHECK(c.diverged[s] == !(c.final_loss[s] <= c.initial_loss[s]));
        REQUIRE(c.losses.size() == 2);  // the loss curves: every step of every seed, step 1 = initial_loss
        for (std::size_t s = 0; s < 2; ++s) {
            REQUIRE(c.losses[s].size() == 3);
            CHECK(c.losses[s][0] == c.initial_loss[s]);
            CHECK(c.final_loss[s] == Approx((c.losses[s][1] + c.losses[s][2]) / 2));  // tail 2
        }
        std::vector<double> mean, sd;
        tv::loss_curve(c, 3, mean, sd);
        for (std::size_t t = 0; t < 3; ++t) CHECK(mean[t] == Approx((c.losses[0][t] + c.losses[1][t]) / 2));
    }
    tv::SweepCell c;  // the summary: mean and std over the seeds that did not diverge
    c.final_loss = {2.0, NAN, 4.0, 3.0};
    c.diverged = {false, true, false, false};
    CHECK(c.n_diverged() == 1);
    CHECK(c.mean_final() == Approx(3.0));
    CHECK(c.sd_final() == Approx(1.0));
    c.losses = {{4.0, 3.0, 2.0}, {4.0, 5.0}, {4.0, 3.0, 4.0}};  // the second run went NaN at step 3
    std::vector<double> mean, sd;
    tv::loss_curve(c, 4, mean, sd);
    CHECK(mean[1] == Approx(11.0 / 3));
    CHECK(mean[2] == Approx(3.0));  // over the two runs that reached step 3
    CHECK(sd[2] == Approx(std::sqrt(2.0)));
    CHECK(std::isnan(mean[3]));  // no run reached step 4
}

}  // namespace xg_test_tutorials_10_pre_vs_post_ln
