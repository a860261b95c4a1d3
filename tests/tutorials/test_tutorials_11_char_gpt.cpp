// Tutorial 11 (character GPT): A3.4, A3.5, A2.5 on tiny settings. The numbers the tutorial prints,
// asserted (its guide-drift test is in test_tutorials.cpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tutorials/11_char_gpt/char_gpt_run.hpp"

namespace xg_test_tutorials_11_char_gpt {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace tv = tutorial_values;
using Catch::Matchers::Contains;

TEST_CASE("A3.4 A3.5 A2.5: the character GPT trains and samples with LayerNorm and RMSNorm, and without ln_f (tiny)",
          "[tutorials][experiments]") {
    tv::CharGptRunConfig cfg;
    cfg.d_model = 16;
    cfg.n_layers = 1;
    cfg.context = 16;
    cfg.batch = 4;
    cfg.steps = 3;
    cfg.warmup = 1;
    cfg.seeds = {1, 2};
    cfg.sample_chars = 10;
    cfg.progress = false;
    const tv::CharGptRun r = tv::a3_4_a3_5_char_gpt(cfg);
    CHECK(r.vocab > 10);
    CHECK(r.heldout_chars > 3000);  // the last tenth of the text
    CHECK(r.layer_norm.loss.size() == 3);
    CHECK(r.rms_norm.loss.size() == 3);
    CHECK(std::fabs(r.layer_norm.loss.front() - r.initial_loss_expected) < 0.5);  // ~ln(vocab) at init
    for (const tv::SeedRuns* runs : {&r.ln, &r.rms, &r.no_ln_f}) {
        INFO(runs->name);
        REQUIRE(runs->heldout.size() == 2);
        CHECK(std::fabs(runs->heldout[0] - r.initial_loss_expected) < 0.5);  // 3 steps: still ~ln(vocab)
        CHECK(runs->ms_per_step[0] > 0.0);
    }
    CHECK(r.sample_layer_norm.rfind(cfg.prompt, 0) == 0);
    CHECK(r.sample_layer_norm.size() == cfg.prompt.size() + 10);
    CHECK_THAT(r.architecture, Contains("ln_f"));
}

}  // namespace xg_test_tutorials_11_char_gpt
