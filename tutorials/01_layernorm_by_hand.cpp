// Tutorial 01: LayerNorm by hand (A0.1, A2.1, A2.2, A3.1, A3.2).
// Guide: docs/tutorials/01-layernorm-by-hand.md. Run with --step to pause after each step.
#include <fmt/format.h>

#include "tutorials/common/layernorm_by_hand.hpp"
#include "tutorials/common/tutorial.hpp"

using namespace xg::tutorial;
namespace tv = tutorial_values;

int main(int argc, char** argv) {
    Tutorial tut(argc, argv,
                 {"01 LayerNorm by hand", "A0.1, A2.1, A2.2, A3.1, A3.2", "docs/tutorials/01-layernorm-by-hand.md",
                  "under 1 s", "", ""});

    tut.section("A0.1", "the formula as four core ops on x = [[2, 4, 6, 8]] (H = 4, eps = 1e-5)");
    const tv::FormulaSteps f = tv::a0_1_formula();
    tut.step("mean over the last axis  mu = mean(x, {-1}, keepdim)", vec(f.mean));
    tut.step("biased variance (divide by H)  var(x, {-1}, unbiased=false)", vec(f.variance));
    tut.step("x_hat = (x - mu) / sqrt(var + eps)", vec(f.x_hat, 7));
    tut.step(fmt::format("gamma {} = {} and beta {} = {} (initialised to 1 and 0)", shape(f.gamma_shape), vec(f.gamma, 0),
                         shape(f.beta_shape), vec(f.beta, 0)));
    tut.step("y = gamma * x_hat + beta", vec(f.y, 7));

    tut.section("A2.1", "hand calculation on x = (2, 4, 6, 8), eps ignored as in the article");
    const tv::HandCalculation h = tv::a2_1_hand_calculation();
    tut.step("mean = (2 + 4 + 6 + 8) / 4", h.mean);
    tut.step("variance = (9 + 1 + 1 + 9) / 4", h.variance);
    tut.step("sigma = sqrt(5)", h.sigma);
    tut.step("x - mean", vec(h.centered));
    tut.step("(x - mean) / sigma", vec(h.normalized));
    tut.say("rounded as in the article: " + vec(h.normalized, 2));
    tut.step("sum of the outputs", h.sum_of_outputs);

    tut.section("A2.2", "the library's LayerNorm(4) on [[2, 4, 6, 8]]");
    const tv::Builtin b = tv::a2_2_builtin();
    tut.step(fmt::format("weight {} = {}, bias {} = {}", shape(b.weight_shape), vec(b.weight, 0), shape(b.bias_shape),
                         vec(b.bias, 0)));
    tut.step("LayerNorm(4)(x)", vec(b.out, 7));
    tut.step("max |LayerNorm - A0.1 core ops|", sci(b.max_diff_vs_formula));
    tut.step("max |LayerNorm - A2.1 hand (no eps)|", sci(b.max_diff_vs_hand));
    tut.conclude("same as the hand calculation to 2 decimals;");
    tut.say("   eps = 1e-5 moves the 6th decimal (-1.3416408 -> -1.3416394)");

    tut.section("A3.1", "single vector x = [1, 2, 3, 4], eps = 1e-5, output rounded to 5 decimals");
    const tv::SingleVector s = tv::a3_1_single_vector();
    tut.step("mean", s.mean);
    tut.step("variance", s.variance);
    tut.step("sigma = sqrt(variance + 1e-5)", s.sigma, 7);
    tut.article_note(num(s.article_sigma), num(s.sigma), "1.1180385 rounds to 1.11804; the article truncated it");
    tut.step("output with gamma = 1, beta = 0", vec(s.plain));
    tut.step("output with gamma = 2, beta = 1", vec(s.affine));
    tut.say("to 7 decimals: " + vec(s.affine, 7));
    tut.say("truncated to 4 decimals: " + vec(s.affine_trunc4, 4));
    tut.say("rounded to 4 decimals:   " + vec(s.affine_round4, 4));
    tut.article_note(vec(s.article_affine, 4), vec(s.affine_round4, 4),
                     "the article's -1.6832 and 3.6832 are -1.68327 and 3.68327 truncated, not rounded");

    tut.section("A3.2", "pitfall: forgetting eps on a constant vector");
    const tv::EpsPitfall p = tv::a3_2_eps_pitfall();
    tut.step("x (variance 0)", vec(p.x, 1));
    tut.step("without eps: (x - mu) / sqrt(0)", vec(p.out_without_eps));
    tut.step("its gradient", vec(p.grad_without_eps));
    tut.say("anomaly mode names the op:");
    tut.say("  " + p.anomaly_message);
    tut.step(fmt::format("with eps = 1e-5 and beta = {}", vec(p.beta, 2)), vec(p.out_with_eps));
    tut.step(fmt::format("gradient of sum(y * {}) with eps", vec(p.upstream, 0)), vec(p.grad_with_eps, 4));
    tut.say("finite: gamma / sqrt(eps) * (w - mean(w)) = 316.2278 * [-1.5, -0.5, 0.5, 1.5]");
    tut.step("a vector constant only up to rounding: x", vec(p.near_constant, 1));
    tut.step("without eps", vec(p.near_constant_without_eps));
    tut.step("with eps", vec(p.near_constant_with_eps));
    tut.conclude("without eps, rounding noise is divided by itself;");
    tut.say("   with eps the output is beta (here 0) and the gradients stay finite");
    return 0;
}
