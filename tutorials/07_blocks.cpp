// Tutorial 07: LayerNorm inside Transformer blocks - Post-LN and Pre-LN blocks, the final ln_f,
// the runnable mini model, a lazily built LayerNorm, identity-at-init tricks and LayerNorm's
// relatives (A0.4, A0.5, A2.3, A2.5, A2.6, A4.3, A4.4, A4.7, A4.8).
// Guide: docs/tutorials/07-blocks.md. Run with --step to pause after each step.
#include <fmt/format.h>

#include "tutorials/common/blocks_demo.hpp"
#include "tutorials/common/tutorial.hpp"

#ifndef XGRAD_TUTORIAL_FIXTURES_DIR
#define XGRAD_TUTORIAL_FIXTURES_DIR "tests/fixtures"
#endif

using namespace xg::tutorial;
namespace tv = tutorial_values;

int main(int argc, char** argv) {
    Tutorial tut(argc, argv,
                 {"07 LayerNorm in Transformer blocks", "A0.4, A0.5, A2.3, A2.5, A2.6, A4.3, A4.4, A4.7, A4.8",
                  "docs/tutorials/07-blocks.md", "about 1 s", "", ""});

    tut.section("A0.4 / A0.5", "Post-LN and Pre-LN blocks with multi-head self-attention (d 16, 4 heads)");
    tut.say("Post-LN: x = norm1(x + attn(x, x, x)); x = norm2(x + ffn(x))");
    tut.say("Pre-LN:  x = x + attn(norm1(x)); x = x + ffn(norm2(x))");
    tut.say("ffn = Linear(d, 4d) GELU Linear(4d, d)");
    const tv::TransformerBlocks b = tv::a0_4_a0_5_blocks();
    tut.step(fmt::format("x {} -> Post-LN {} and Pre-LN {}, {} parameter tensors per block", shape(b.in_shape),
                         shape(b.post_shape), shape(b.pre_shape), b.params));
    tut.step(fmt::format("Post-LN output tokens: max |mean| = {}, max |var - 1| = {} (normalised)", sci(b.post_max_token_mean),
                         sci(b.post_max_token_var_err)));
    tut.step(fmt::format("Pre-LN output tokens: std between {} and {} (not normalised: x + branch)", num(b.pre_token_std_min, 3),
                         num(b.pre_token_std_max, 3)));
    tut.step("gradient checks of tiny blocks");
    tut.say(gradcheck_line(b.post_gradcheck, 1e-8, 1e-5));
    tut.say(gradcheck_line(b.pre_gradcheck, 1e-8, 1e-5));
    tut.say("the claim that Pre-LN trains without warm-up and tolerates larger learning rates");
    tut.say("is measured in tutorial 10");

    tut.section("A2.3 / A4.3", "placement: Post-LN y = LN(x + F(x)), Pre-LN y = x + F(LN(x)); 8 blocks, d 32");
    const tv::ResidualStream s = tv::a2_3_a2_5_residual_stream();
    std::vector<std::vector<std::string>> rows{{"depth", "Post-LN std", "Pre-LN std"}};
    for (std::size_t i = 0; i < s.post_std.size(); ++i) rows.push_back({std::to_string(i), num(s.post_std[i], 4), num(s.pre_std[i], 4)});
    tut.step("standard deviation of the residual stream after each block");
    tut.show(table(rows));
    tut.conclude("Post-LN renormalises after every block; Pre-LN's residual stream grows as blocks add to it");

    tut.section("A2.5", "the final ln_f of a Pre-LN stack");
    tut.step("largest per-token std of the last Pre-LN block's output", s.pre_final_token_std_max, 4);
    tut.step(fmt::format("logits std of 8 Pre-LN blocks + head: with ln_f {}, without {}", num(s.logits_std_with_ln_f, 4),
                         num(s.logits_std_without_ln_f, 4)));
    tut.say("at init the stream grows slowly, so the difference is small here; ln_f bounds the");
    tut.say("head's input whatever scale the residual stream reaches in a deep or trained stack");

    tut.section("A2.6", "the runnable MiniPreLNModel(d=32, n_layers=4, vocab=1000)");
    const tv::MiniModelRun m = tv::a2_6_mini_model(XGRAD_TUTORIAL_FIXTURES_DIR);
    tut.step("logits shape", shape(m.logits_shape));
    tut.step(fmt::format("loss = {}   (ln 1000 = {})", num(m.loss, 4), num(m.ln_vocab, 4)));
    tut.say("finite and near ln 1000; random logits of std s add about s^2/2, so it sits a little above 6.91");
    tut.step(fmt::format("{} parameter tensors, {} scalars; gradient norm after backward {} (finite: {})", m.parameter_tensors,
                         m.scalars, num(m.grad_norm, 4), m.all_grads_finite ? "yes" : "NO"));
    if (m.fixture_found) {
        tut.step(fmt::format("PyTorch's weights and inputs (fixture mini_model): loss {}, torch {}",
                             num(m.our_loss_torch_weights, 10), num(m.torch_loss, 10)));
        tut.say(fmt::format("max |logits - torch| = {}, max relative gradient difference = {}", sci(m.max_logits_diff),
                            sci(m.max_grad_rel_diff)));
    } else {
        tut.say("(fixture tests/fixtures/mini_model not found: PyTorch comparison skipped)");
    }

    tut.section("A4.4", "a LayerNorm built lazily from the first input (Keras build)");
    const tv::LazyBuild l = tv::a4_4_lazy();
    tut.step("parameters before the first call", l.built_before ? std::string("exist") : std::string("none"));
    tut.step(fmt::format("after x (3, 7, 10): gamma {}, beta {}", shape(l.gamma_shape), shape(l.beta_shape)));
    tut.step("max |lazy - nn::LayerNorm(10)|", sci(l.max_diff_vs_layernorm));
    tut.step("a later input with another last axis");
    tut.say(l.mismatch_error);

    tut.section("A4.7", "starting a Pre-LN block as the identity (d 16, 4 heads)");
    const tv::IdentityInit id = tv::a4_7_identity_init();
    tut.step("default init: max |block(x) - x|", id.default_change, 5);
    tut.step("LayerNorm gammas = 0.01: max |block(x) - x|", id.small_gamma_change, 5);
    tut.say("(not 0: the FFN branch still adds Linear2(GELU(bias1)) + bias2)");
    tut.step("zero-initialised last Linear of both branches: max |block(x) - x|", sci(id.zero_residual_change));
    tut.step("gradient norm reaching that zeroed weight", id.zeroed_weight_grad_norm, 5);
    tut.conclude("identity at init, yet trainable; a Post-LN block cannot start as identity (it returns LN(x))");

    tut.section("A4.8", "relatives: RMSNorm, ScaleNorm, DeepNorm");
    const tv::Relatives r = tv::a4_8_relatives();
    tut.step("x", vec(r.x, 1));
    tut.step("LayerNorm(4)", vec(r.layer_norm));
    tut.step("RMSNorm(4): x / sqrt(mean(x^2) + eps) * gamma", vec(r.rms_norm));
    tut.say("max |nn::RMSNorm - formula| = " + sci(r.rms_vs_formula));
    tut.step("ScaleNorm g x / ||x|| with g = sqrt(4)", vec(r.scale_norm));
    tut.say("max |ScaleNorm(g = sqrt(d)) - RMSNorm| (eps 0) = " + sci(r.scale_vs_rms));
    tut.step("LayerNorm vs RMSNorm on a zero-mean vector: max diff", sci(r.ln_vs_rms_zero_mean));
    tut.step(fmt::format("DeepNorm for N = {} layers: alpha = (2N)^(1/4) = {}", r.deepnorm_layers, num(r.deepnorm_alpha, 4)));
    tut.say(fmt::format("and the branch weights start scaled by beta = (8N)^(-1/4) = {}", num(r.deepnorm_beta, 4)));
    tut.step(fmt::format("||F(x)|| / ||residual|| at init: Post-LN {}, DeepNorm {}", num(r.branch_ratio_post, 4),
                         num(r.branch_ratio_deep, 4)));
    tut.conclude("DeepNorm up-weights the residual (alpha > 1) and shrinks the branch,");
    tut.say("   so each update moves the model less");
    return 0;
}
