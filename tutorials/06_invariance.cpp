// Tutorial 06: the invariance table of the LayerNorm paper (A1.2), measured.
// Guide: docs/tutorials/06-invariance.md. Run with --step to pause after each step.
#include <fmt/format.h>

#include "tutorials/common/invariance.hpp"
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
    return 0;
}
