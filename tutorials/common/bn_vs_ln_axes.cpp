#include "tutorials/common/bn_vs_ln_axes.hpp"

#include <memory>

#include <fmt/format.h>
#include <xtensor/xview.hpp>
#include <xtensor/xmath.hpp>

#include "core/ops.hpp"
#include "core/random.hpp"
#include "nn/norm_layers.hpp"
#include "tutorials/common/tutorial.hpp"

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
