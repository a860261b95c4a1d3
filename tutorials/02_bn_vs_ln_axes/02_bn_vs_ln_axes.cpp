// Tutorial 02: BatchNorm vs LayerNorm - which axis (A0.2, A1.1, A3.3, A4.1, A4.2).
// Guide: docs/tutorials/02-bn-vs-ln-axes.md. Run with --step to pause after each step.
#include "tutorials/02_bn_vs_ln_axes/bn_vs_ln_axes.hpp"

#include <memory>

#include <fmt/format.h>
#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

#include "core/ops/ops.hpp"
#include "core/engine/random.hpp"
#include "nn/modules/norm_layers.hpp"
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

namespace tutorial_values {

using namespace xg;
using xg::tutorial::max_abs_diff;

namespace {

Array batchnorm_train(const Array& x) {
    auto bn = std::make_shared<nn::BatchNorm1d>(x.shape()[1]);
    return bn->forward(Tensor(x)).value();
}

Array layernorm(const Array& x) {
    auto ln = std::make_shared<nn::LayerNorm>(x.shape()[x.dimension() - 1]);
    return ln->forward(Tensor(x)).value();
}

std::size_t saved_numbers(const Tensor& t) {
    std::size_t n = 0;
    for (const SavedInfo& s : t.node()->saved) {
        std::size_t k = 1;
        for (std::size_t d : s.shape) k *= d;
        n += k;
    }
    return n;
}

}  // namespace

AxisStats axis_stats(const Array& x) {
    AxisStats s;
    const Tensor t(x);
    s.x = x;
    s.bn_mean = mean(t, {0}).value();
    s.bn_var = var(t, {0}, /*unbiased=*/false).value();
    s.ln_mean = mean(t, {-1}).value();
    s.ln_var = var(t, {-1}, false).value();
    s.bn_out = batchnorm_train(x);
    s.ln_out = layernorm(x);
    return s;
}

AxesComparison a0_2_axes() {
    AxesComparison c;
    const Array x = {{1.0, 3.0, 5.0, 7.0}, {2.0, 2.0, 2.0, 6.0}, {3.0, 7.0, 2.0, 0.0}};
    c.stats = axis_stats(x);

    Array other = x;
    xt::view(other, 2, xt::all()) *= 10.0;  // change only sample 2
    c.bn_change_from_other_sample = max_abs_diff(Array(xt::row(batchnorm_train(other), 0)), Array(xt::row(c.stats.bn_out, 0)));
    c.ln_change_from_other_sample = max_abs_diff(Array(xt::row(layernorm(other), 0)), Array(xt::row(c.stats.ln_out, 0)));

    auto bn = std::make_shared<nn::BatchNorm1d>(4);
    auto ln = std::make_shared<nn::LayerNorm>(4);
    const Array bn_train = bn->forward(Tensor(x)).value();  // also updates the running statistics once
    const Array ln_train = ln->forward(Tensor(x)).value();
    bn->eval();
    ln->eval();
    c.bn_train_vs_eval = max_abs_diff(bn_train, bn->forward(Tensor(x)).value());
    c.ln_train_vs_eval = max_abs_diff(ln_train, ln->forward(Tensor(x)).value());
    return c;
}

AxisStats a1_1_scores() { return axis_stats(Array{{90.0, 80.0, 70.0}, {60.0, 50.0, 40.0}}); }

AxisPitfall a3_3_axis_pitfall() {
    AxisPitfall p;
    const Tensor x(Array{{1.0, 3.0, 5.0, 7.0}, {2.0, 2.0, 2.0, 6.0}, {3.0, 7.0, 2.0, 0.0}});
    const double eps = 1e-5;
    p.x = x.value();
    // The same formula; only the axis of mean/var differs.
    p.axis0_by_hand = ((x - mean(x, {0}, true)) / sqrt(var(x, {0}, false, true) + eps)).value();
    p.axis_last_by_hand = ((x - mean(x, {-1}, true)) / sqrt(var(x, {-1}, false, true) + eps)).value();
    p.axis0_vs_batchnorm = max_abs_diff(p.axis0_by_hand, batchnorm_train(p.x));
    p.axis0_vs_layernorm = max_abs_diff(p.axis0_by_hand, layernorm(p.x));
    p.last_vs_layernorm = max_abs_diff(p.axis_last_by_hand, layernorm(p.x));
    return p;
}

LayoutCheck a4_1_layout() {
    LayoutCheck c;
    Generator gen(41);
    const std::size_t H = 8;
    auto ln = std::make_shared<nn::LayerNorm>(H);
    for (Shape s : {Shape{2, 3, H}, Shape{1, 5, H}, Shape{4, 1, H}}) {
        Tensor x = randn(s, gen) * 3.0 + 2.0;
        Tensor y = ln->forward(x);
        c.shapes.push_back(s);
        c.max_token_mean.push_back(xt::amax(xt::abs(mean(y, {-1}).value()))());
        c.max_token_var_err.push_back(xt::amax(xt::abs(var(y, {-1}, false).value() - 1.0))());
    }
    Tensor batch = randn({2, 3, H}, gen);
    Tensor token = Tensor(Array(xt::view(batch.value(), 1, 2, xt::all())));
    const Array alone = ln->forward(token).value();
    const Array inside = xt::view(ln->forward(batch).value(), 1, 2, xt::all());
    c.same_token_other_batch = max_abs_diff(alone, inside);
    return c;
}

ComparisonTable a4_2_table() {
    ComparisonTable t;
    const AxesComparison m = a0_2_axes();
    {
        Generator gen(42);
        Tensor x = randn({4, 16, 32}, gen, true);
        auto ln = std::make_shared<nn::LayerNorm>(32);
        t.ln_saved_stats = saved_numbers(ln->forward(x));
        auto bn = std::make_shared<nn::BatchNorm1d>(32);
        t.bn_saved_stats = saved_numbers(bn->forward(reshape(x, {64, 32})));
    }
    t.rows = {
        {"", "BatchNorm", "LayerNorm"},
        {"statistics", "per feature, across the batch", "per sample, across its features"},
        {"batch-size sensitivity (a)", fmt::format("high: moves by {}", tutorial::num(m.bn_change_from_other_sample, 4)),
         fmt::format("none: moves by {}", tutorial::num(m.ln_change_from_other_sample, 4))},
        {"train vs inference (b)", fmt::format("differ: {} (running stats)", tutorial::num(m.bn_train_vs_eval, 4)),
         fmt::format("identical: {}", tutorial::num(m.ln_train_vs_eval, 4))},
        {"typical models", "CNNs, large batches", "RNNs, Transformers"},
        {"memory (c)", fmt::format("{} numbers (per feature)", t.bn_saved_stats), fmt::format("{} numbers (per token)", t.ln_saved_stats)},
    };
    t.notes = {"(a) how far sample 0's output moves when sample 2 changes",
               "(b) max |train - eval| on the same batch",
               "(c) statistics the graph keeps for backward, x of shape (4, 16, 32)"};
    return t;
}

}  // namespace tutorial_values
