// Tutorial 02: BatchNorm vs LayerNorm - which axis (A0.2, A1.1, A3.3, A4.1, A4.2).
// Guide: docs/tutorials/02-bn-vs-ln-axes.md. Run with --step to pause after each step.
#include <fmt/format.h>

#include "tutorials/common/bn_vs_ln_axes.hpp"
#include "tutorials/common/tutorial.hpp"

using namespace xg::tutorial;
namespace tv = tutorial_values;

int main(int argc, char** argv) {
    Tutorial tut(argc, argv,
                 {"02 BatchNorm vs LayerNorm: the axis", "A0.2, A1.1, A3.3, A4.1, A4.2", "docs/tutorials/02-bn-vs-ln-axes.md",
                  "under 1 s", "", ""});

    tut.section("A0.2", "one (B, H) = (3, 4) matrix, two sets of statistics");
    const tv::AxesComparison c = tv::a0_2_axes();
    tut.step("x");
    tut.show(matrix(c.stats.x, 1));
    tut.step("BatchNorm: one mean per feature (down the batch)", vec(c.stats.bn_mean));
    tut.step("BatchNorm: one biased variance per feature", vec(c.stats.bn_var));
    tut.step("LayerNorm: one mean per sample (across the features)", vec(c.stats.ln_mean));
    tut.step("LayerNorm: one biased variance per sample", vec(c.stats.ln_var));
    tut.step("BatchNorm1d(4) output (training mode)");
    tut.show(matrix(c.stats.bn_out, 5));
    tut.step("LayerNorm(4) output");
    tut.show(matrix(c.stats.ln_out, 5));
    tut.step("the blog's table, with what this run measured");
    tut.show(table({{"", "BatchNorm", "LayerNorm"},
                            {"normalised axis", "batch (per feature)", "features (per sample)"},
                            {"depends on the batch", fmt::format("yes: sample 0 moves {} when sample 2 x10", num(c.bn_change_from_other_sample, 4)),
                             fmt::format("no: moves {}", num(c.ln_change_from_other_sample, 4))},
                            {"train / eval behaviour", fmt::format("different (running stats): {}", num(c.bn_train_vs_eval, 4)),
                             fmt::format("same: {}", num(c.ln_train_vs_eval, 4))},
                            {"typical use", "CNN", "RNN / Transformer"}}));

    tut.section("A1.1", "samples [90, 80, 70] and [60, 50, 40]");
    const tv::AxisStats s = tv::a1_1_scores();
    tut.step("BatchNorm means per feature (90+60)/2, (80+50)/2, (70+40)/2", vec(s.bn_mean, 1));
    tut.step("LayerNorm means per sample (90+80+70)/3, (60+50+40)/3", vec(s.ln_mean, 1));
    tut.step("BatchNorm1d(3) output: each feature becomes +-1 (variance 225)");
    tut.show(matrix(s.bn_out, 5));
    tut.step("LayerNorm(3) output: both samples become the same pattern (variance 66.67)");
    tut.show(matrix(s.ln_out, 5));
    tut.conclude("BN compares students per subject; LN compares each student's subjects with each other");

    tut.section("A3.3", "pitfall: the same formula along axis 0 is BatchNorm, not LayerNorm");
    const tv::AxisPitfall p = tv::a3_3_axis_pitfall();
    tut.step("(x - mean(x, 0)) / sqrt(var(x, 0) + eps)");
    tut.show(matrix(p.axis0_by_hand, 5));
    tut.step("(x - mean(x, -1)) / sqrt(var(x, -1) + eps)");
    tut.show(matrix(p.axis_last_by_hand, 5));
    tut.step("max |axis 0 version - BatchNorm1d|", sci(p.axis0_vs_batchnorm));
    tut.step("max |axis 0 version - LayerNorm|", num(p.axis0_vs_layernorm));
    tut.step("max |axis -1 version - LayerNorm|", sci(p.last_vs_layernorm));

    tut.section("A4.1", "(batch, seq, hidden): LayerNorm normalises the last axis only");
    const tv::LayoutCheck l = tv::a4_1_layout();
    for (std::size_t i = 0; i < l.shapes.size(); ++i) {
        tut.step(fmt::format("x {}: max |token mean| = {}, max |token variance - 1| = {}", shape(l.shapes[i]),
                             sci(l.max_token_mean[i]), sci(l.max_token_var_err[i])));
    }
    tut.step("one token normalised alone vs inside a (2, 3, 8) batch: max diff", sci(l.same_token_other_batch));
    tut.conclude("any batch size and sequence length; the variance is 1 - eps/(var + eps), not exactly 1");

    tut.section("A4.2", "BatchNorm vs LayerNorm table, measured where a number exists");
    const tv::ComparisonTable t = tv::a4_2_table();
    tut.step("table");
    tut.show(table(t.rows));
    for (const std::string& note : t.notes) tut.say(note);
    tut.conclude(fmt::format("LN keeps per-token mean and 1/sigma ({} numbers) where BN keeps per-feature ones ({})",
                             t.ln_saved_stats, t.bn_saved_stats));
    return 0;
}
