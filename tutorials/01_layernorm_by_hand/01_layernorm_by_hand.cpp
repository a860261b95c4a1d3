// Tutorial 01: LayerNorm by hand (A0.1, A2.1, A2.2, A3.1, A3.2).
// Guide: docs/tutorials/01-layernorm-by-hand.md. Run with --step to pause after each step.
#include "tutorials/01_layernorm_by_hand/layernorm_by_hand.hpp"

#include <cmath>
#include <memory>

#include <fmt/format.h>

#include "core/ops/ops.hpp"
#include "nn/functional/functional.hpp"
#include "nn/modules/norm_layers.hpp"
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

namespace tutorial_values {

using namespace xg;
namespace F = xg::nn::functional;

FormulaSteps a0_1_formula() {
    FormulaSteps s;
    Tensor x({{2.0, 4.0, 6.0, 8.0}});
    const std::size_t H = x.size(1);
    Tensor gamma = ones({H}), beta = zeros({H});
    Tensor mu = mean(x, {-1}, true);                         // Step 1
    Tensor var2 = var(x, {-1}, /*unbiased=*/false, true);    // Step 2: divide by H
    Tensor x_hat = (x - mu) / sqrt(var2 + s.eps);            // Step 3: eps inside the root
    Tensor y = gamma * x_hat + beta;                         // Step 4
    s.x = x.value();
    s.mean = mu.value();
    s.variance = var2.value();
    s.x_hat = x_hat.value();
    s.y = y.value();
    s.gamma = gamma.value();
    s.beta = beta.value();
    s.gamma_shape = gamma.shape();
    s.beta_shape = beta.shape();
    return s;
}

HandCalculation a2_1_hand_calculation() {
    HandCalculation h;
    h.x = Array{2.0, 4.0, 6.0, 8.0};
    double sum = 0;
    for (double v : h.x) sum += v;
    h.mean = sum / 4.0;
    double squares = 0;
    for (double v : h.x) squares += (v - h.mean) * (v - h.mean);
    h.variance = squares / 4.0;
    h.sigma = std::sqrt(h.variance);  // the article ignores eps here
    h.centered = h.x - h.mean;
    h.normalized = h.centered / h.sigma;
    h.sum_of_outputs = 0;
    for (double v : h.normalized) h.sum_of_outputs += v;
    return h;
}

Builtin a2_2_builtin() {
    Builtin b;
    auto ln = std::make_shared<nn::LayerNorm>(4);
    Tensor y = ln->forward(Tensor({{2.0, 4.0, 6.0, 8.0}}));
    b.out = y.value();
    b.weight = ln->weight.value();
    b.bias = ln->bias.value();
    b.weight_shape = ln->weight.shape();
    b.bias_shape = ln->bias.shape();
    b.max_diff_vs_formula = xg::tutorial::max_abs_diff(b.out, a0_1_formula().y);
    Array hand = a2_1_hand_calculation().normalized;
    hand.reshape({1, 4});
    b.max_diff_vs_hand = xg::tutorial::max_abs_diff(b.out, hand);
    return b;
}

Array round_to(const Array& a, int decimals) {
    const double scale = std::pow(10.0, decimals);
    Array r = a;
    for (double& v : r) v = std::round(v * scale) / scale;
    return r;
}

Array truncate_to(const Array& a, int decimals) {
    const double scale = std::pow(10.0, decimals);
    Array r = a;
    for (double& v : r) v = std::trunc(v * scale) / scale;
    return r;
}

SingleVector a3_1_single_vector() {
    SingleVector s;
    Tensor x{1.0, 2.0, 3.0, 4.0};
    // The LeetCode version takes statistics over the whole vector: normalized_shape = (4,).
    s.x = x.value();
    s.mean = mean(x).item();
    s.variance = var(x, {0}, false).item();
    s.sigma = std::sqrt(s.variance + 1e-5);
    s.plain = F::layer_norm(x, {4}, ones({4}), zeros({4}), 1e-5).value();
    s.affine = F::layer_norm(x, {4}, full({4}, 2.0), full({4}, 1.0), 1e-5).value();
    s.affine_round4 = round_to(s.affine, 4);
    s.affine_trunc4 = truncate_to(s.affine, 4);
    return s;
}

namespace {

// The article's "wrong" version: no eps at all.
Tensor layer_norm_without_eps(const Tensor& x, const Tensor& gamma, const Tensor& beta) {
    Tensor mu = mean(x, {-1}, true);
    Tensor v = var(x, {-1}, false, true);
    return gamma * ((x - mu) / sqrt(v)) + beta;
}

}  // namespace

EpsPitfall a3_2_eps_pitfall() {
    EpsPitfall p;
    const Tensor gamma = ones({4});
    const Tensor beta{0.5, -0.5, 0.25, 0.0};
    const Tensor w{1.0, 2.0, 3.0, 4.0};  // upstream gradient: loss = sum(y * w)
    p.beta = beta.value();
    p.upstream = w.value();
    {
        Tensor x(full({4}, 3.0).value(), true);
        Tensor y = layer_norm_without_eps(x, gamma, beta);
        sum(y * w).backward();
        p.x = x.value();
        p.out_without_eps = y.value();
        p.grad_without_eps = x.grad_value();
    }
    try {
        AnomalyModeGuard anomaly;
        Tensor x(full({4}, 3.0).value(), true);
        Tensor y = layer_norm_without_eps(x, gamma, beta);
        sum(y * w).backward();
        p.anomaly_message = "(no error)";
    } catch (const Error& e) {
        p.anomaly_message = e.what();
    }
    {
        Tensor x(full({4}, 3.0).value(), true);
        Tensor y = nn::functional::layer_norm(x, {4}, gamma, beta, 1e-5);
        sum(y * w).backward();
        p.out_with_eps = y.value();
        p.grad_with_eps = x.grad_value();
    }
    Tensor near(full({3}, 0.1).value());
    p.near_constant = near.value();
    p.near_constant_without_eps = layer_norm_without_eps(near, ones({3}), zeros({3})).value();
    p.near_constant_with_eps = nn::functional::layer_norm(near, {3}, ones({3}), zeros({3}), 1e-5).value();
    return p;
}

}  // namespace tutorial_values
