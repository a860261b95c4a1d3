// Tutorial 04: how to compute the variance inside LayerNorm - one-pass E[x^2] - E[x]^2 vs
// two-pass vs Welford on rows with a large mean, and why the library's LayerNorm is robust.
// Guide: docs/tutorials/04-variance.md. Run with --step to pause after each step.
#include <fmt/format.h>

#include "tutorials/common/tutorial.hpp"
#include "tutorials/common/variance.hpp"

using namespace xg::tutorial;
namespace tv = tutorial_values;

int main(int argc, char** argv) {
    Tutorial tut(argc, argv,
                 {"04 Computing the variance", "(supports A0.1, A2.1, A3.1: the sigma^2 step)", "docs/tutorials/04-variance.md",
                  "under 1 s", "", ""});

    tut.section("04.1", "x = offset + [2, 4, 6, 8]: the true variance is 5 for every offset");
    std::vector<std::vector<std::string>> rows{
        {"offset", "E[x^2]-E[x]^2", "two-pass", "Welford", "xg::var", "LN[0] via one-pass", "nn::LayerNorm[0]"}};
    for (const tv::OffsetRow& r : tv::offset_rows()) {
        rows.push_back({sci(r.offset, 0), num(r.one_pass, 4), num(r.two_pass, 4), num(r.welford, 4), num(r.library_var, 4),
                        num(r.ln_first_one_pass, 5), num(r.ln_first_library, 5)});
    }
    tut.step("the three algorithms and the library, and LayerNorm's first output (exact -1.34164)");
    tut.show(table(rows));
    tut.say("E[x^2] - E[x]^2 subtracts two numbers of size offset^2: at 1e8 the squares are ~1e16,");
    tut.say("where doubles are spaced 2 apart, so the variance 5 is lost (6 at 1e8, 0 at 1e9, where");
    tut.say("LN[0] becomes -3/sqrt(eps)); a result below -eps would make sqrt(var + eps) NaN.");

    tut.section("04.2", "rows of randn(16, 768) + offset: worst relative error of the variance");
    std::vector<std::vector<std::string>> wide{
        {"offset", "E[x^2]-E[x]^2", "two-pass", "Welford", "xg::var", "nn::LayerNorm max abs err"}};
    for (const tv::WideRows& w : tv::wide_rows()) {
        wide.push_back({sci(w.offset, 0), sci(w.err_one_pass), sci(w.err_two_pass), sci(w.err_welford),
                        sci(w.err_library_var), sci(w.ln_max_abs_err)});
    }
    tut.step("against a long-double two-pass reference");
    tut.show(table(wide));
    tut.say("the remaining ~6e-9 at offset 1e8 is the spacing of doubles near 1e8 (1.5e-8): the mean itself");
    tut.say("cannot be stored more precisely, whatever the algorithm.");
    tut.conclude("the library never uses E[x^2] - E[x]^2: xg::var is two-pass, and the fused LayerNorm uses a");
    tut.say("   corrected two-pass (it also sums the deviations, whose total is the first mean's rounding");
    tut.say("   error), so a constant row gives exactly beta and a row with mean 1e8 keeps its digits.");
    return 0;
}
