// Tutorial 06: the invariance table of the LayerNorm paper (A1.2), measured.
// Guide: docs/tutorials/06-invariance.md. Run with --step to pause after each step.
#include "tutorials/06_invariance/invariance.hpp"

#include <memory>

#include <fmt/format.h>

#include "core/ops/ops.hpp"
#include "core/engine/random.hpp"
#include "nn/modules/norm_layers.hpp"
#include "tutorials/common/tutorial.hpp"

using namespace xg::tutorial;
namespace tv = tutorial_values;

namespace {

std::string mark(double change) { return fmt::format("{} {}", change < tv::kInvariantTol ? "✓" : "✗", sci(change)); }
std::string paper(bool invariant) { return invariant ? "✓" : "✗"; }

}  // namespace

int main(int argc, char** argv) {
    Tutorial tut(argc, argv,
                 {"06 Invariance of BatchNorm, WeightNorm, LayerNorm", "A1.2", "docs/tutorials/06-invariance.md", "under 1 s", "",
                  ""});

    tut.section("A1.2", "Table 1 of Ba, Kiros & Hinton (2016), measured on a = x W^T, x (8, 5), W (6, 5), eps = 0");
    tut.step("the methods: BatchNorm1d(6) and LayerNorm(6) on a,");
    tut.say("WeightNorm h = x (g v/||v||)^T written from core ops");
    tut.say("each cell: ✓ if the max output change is < 1e-9, then the max |change|;");
    tut.say("'paper' = Table 1's verdicts for B(atchNorm), W(eightNorm), L(ayerNorm)");
    const std::vector<tv::InvarianceRow> rows = tv::a1_2_invariance_table();
    std::vector<std::vector<std::string>> t{{"transformation", "BatchNorm", "WeightNorm", "LayerNorm", "paper"}};
    bool all_agree = true;
    for (const tv::InvarianceRow& r : rows) {
        const bool agree = (r.bn_change < tv::kInvariantTol) == r.paper_bn && (r.wn_change < tv::kInvariantTol) == r.paper_wn &&
                           (r.ln_change < tv::kInvariantTol) == r.paper_ln;
        if (r.in_paper) all_agree = all_agree && agree;
        t.push_back({r.transformation, mark(r.bn_change), mark(r.wn_change), mark(r.ln_change),
                     r.in_paper ? fmt::format("{} {} {}", paper(r.paper_bn), paper(r.paper_wn), paper(r.paper_ln)) : "-"});
    }
    tut.step("the table");
    tut.show(table(t));
    tut.say("the last row is not in the paper's table: the article's prose claims LN is invariant");
    tut.say("to shifting a single sample.");
    tut.step("every measured cell matches the paper", all_agree ? std::string("yes") : std::string("NO"));
    tut.article_note("LN is invariant to \"scaling and shifting of a single sample\"",
                     fmt::format("re-scaling ✓, re-centering ✗ (max change {})", num(rows.back().ln_change, 4)),
                     "the prose overstates Table 1: shifting x_n adds W c, a different amount to each unit of a");
    tut.say("with the default eps = 1e-5 the ✓ cells of LN/BN become approximate (changes ~eps/var),");
    tut.say("not exact.");
    tut.conclude(all_agree ? "Table 1 holds in every cell; LN survives re-scaling one case, not re-centering it"
                           : "the measurements DISAGREE with Table 1: see the cells above");
    return 0;
}

namespace tutorial_values {

using namespace xg;

Tensor weight_norm_linear(const Tensor& x, const Tensor& v, const Tensor& g) {
    const Tensor row_norm = sqrt(sum(v * v, {1}, true));  // (H, 1)
    const Tensor w = unsqueeze(g, 1) * v / row_norm;       // w_i = g_i v_i / ||v_i||
    return matmul(x, transpose(w, 0, 1));
}

namespace {

struct Outputs {
    Array bn, wn, ln;
};

// The three normalisations of the summed inputs a = x W^T (no affine part beyond WN's gain).
Outputs normalise(const Tensor& x, const Tensor& W, const Tensor& g) {
    NoGradGuard no_grad;
    const std::size_t H = W.size(0);
    auto bn = std::make_shared<nn::BatchNorm1d>(H, /*eps=*/0.0, 0.1, /*affine=*/false, /*track_running_stats=*/false);
    auto ln = std::make_shared<nn::LayerNorm>(H, /*eps=*/0.0, /*elementwise_affine=*/false);
    const Tensor a = matmul(x, transpose(W, 0, 1));
    return {bn->forward(a).value(), weight_norm_linear(x, W, g).value(), ln->forward(a).value()};
}

}  // namespace

std::vector<InvarianceRow> a1_2_invariance_table() {
    Generator gen(1607);
    const Tensor x = randn({8, 5}, gen), W = randn({6, 5}, gen);
    Array gains = Array::from_shape({6});
    for (double& v : gains) v = gen.uniform(0.5, 1.5);
    const Tensor g(gains);
    const Outputs base = normalise(x, W, g);
    const Tensor row_shift = randn({1, 5}, gen);   // the same vector added to every weight row
    const Tensor data_shift = randn({1, 5}, gen);  // the same vector added to every sample

    auto with_row = [](const Tensor& t, std::size_t r, double scale, const Tensor& shift) {
        Array a = t.value();
        for (std::size_t j = 0; j < a.shape()[1]; ++j) a(r, j) = scale * a(r, j) + shift.value()(0, j);
        return Tensor(a);
    };
    auto row = [&](std::string name, const Tensor& x2, const Tensor& W2, bool bn, bool wn, bool ln, bool in_paper = true) {
        const Outputs o = normalise(x2, W2, g);
        return InvarianceRow{std::move(name), tutorial::max_abs_diff(o.bn, base.bn), tutorial::max_abs_diff(o.wn, base.wn),
                             tutorial::max_abs_diff(o.ln, base.ln), bn, wn, ln, in_paper};
    };
    const Tensor no_shift = zeros({1, 5});
    return {
        row("weight matrix re-scaling (W -> 3 W)", x, W * 3.0, true, true, true),
        row("weight matrix re-centering (W -> W + 1 c^T)", x, W + row_shift, false, false, true),
        row("weight vector re-scaling (w_2 -> 3 w_2)", x, with_row(W, 2, 3.0, no_shift), true, true, false),
        row("dataset re-scaling (x -> 3 x)", x * 3.0, W, true, false, true),
        row("dataset re-centering (x -> x + c)", x + data_shift, W, true, false, false),
        row("single training case re-scaling (x_3 -> 3 x_3)", with_row(x, 3, 3.0, no_shift), W, false, false, true),
        row("single training case re-centering (x_3 -> x_3 + c)", with_row(x, 3, 1.0, data_shift), W, false, false, false,
            /*in_paper=*/false),
    };
}

}  // namespace tutorial_values
