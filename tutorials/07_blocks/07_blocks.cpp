// Tutorial 07: LayerNorm inside Transformer blocks - Post-LN and Pre-LN blocks, the final ln_f,
// the runnable mini model, a lazily built LayerNorm, identity-at-init tricks and LayerNorm's
// relatives (A0.4, A0.5, A2.3, A2.5, A2.6, A4.3, A4.4, A4.7, A4.8).
// Guide: docs/tutorials/07-blocks.md. Run with --step to pause after each step.
#include "tutorials/07_blocks/blocks_demo.hpp"

#include <cmath>
#include <filesystem>

#include <fmt/format.h>
#include <xtensor/xmath.hpp>

#include "core/tools/gradcheck.hpp"
#include "core/io/io.hpp"
#include "core/ops/ops.hpp"
#include "core/engine/random.hpp"
#include "optim/clip.hpp"
#include "tutorials/common/blocks.hpp"
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
    // Where the articles disagree or overstate (claims.md): said here, next to the two blocks.
    tut.article_note("BERT adopted Pre-LN (article 000)", "BERT is Post-LN (article 002)",
                     "BERT adds the residual, then normalises: x = LN(x + F(x)), the Post-LN block");
    tut.article_note("every Transformer now uses Pre-LN, GPT-4 has over a thousand layers (001)",
                     "BERT and the models built on it are Post-LN; GPT-4's depth is unpublished",
                     "overstated; for scale, GPT-3 (cited by article 004) has 96 layers");

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

namespace tutorial_values {

using namespace xg;
using xg::tutorial::max_abs_diff;

namespace {

double stddev(const Array& a) {
    const double m = xt::mean(a)();
    return std::sqrt(xt::mean((a - m) * (a - m))());
}

}  // namespace

TransformerBlocks a0_4_a0_5_blocks() {
    TransformerBlocks r;
    manual_seed(4);
    auto post = std::make_shared<TransformerBlock>(16, 4, /*pre_ln=*/false);
    auto pre = std::make_shared<TransformerBlock>(16, 4, /*pre_ln=*/true);
    const Tensor x = randn({2, 5, 16}) * 2.0;
    const Tensor yp = post->forward(x), yq = pre->forward(x);
    r.in_shape = x.shape();
    r.post_shape = yp.shape();
    r.pre_shape = yq.shape();
    r.params = post->parameters().size();
    r.post_max_token_mean = xt::amax(xt::abs(mean(yp, {-1}).value()))();
    r.post_max_token_var_err = xt::amax(xt::abs(var(yp, {-1}, false).value() - 1.0))();
    const Array token_std = sqrt(var(yq, {-1}, false)).value();
    r.pre_token_std_min = xt::amin(token_std)();
    r.pre_token_std_max = xt::amax(token_std)();

    // Gradient checks of a tiny block of each kind (d 4, 2 heads, 3 tokens), input gradient.
    manual_seed(5);
    auto tiny_post = std::make_shared<TransformerBlock>(4, 2, false);
    auto tiny_pre = std::make_shared<TransformerBlock>(4, 2, true);
    const std::vector<Tensor> in{randn({1, 3, 4}, true)};
    GradcheckOptions opt;
    opt.name = "Post-LN block (d 4, 2 heads)";
    const GradcheckResult gp = gradcheck([&](const std::vector<Tensor>& v) { return tiny_post->forward(v[0]); }, in, opt);
    opt.name = "Pre-LN block (d 4, 2 heads)";
    const GradcheckResult gq = gradcheck([&](const std::vector<Tensor>& v) { return tiny_pre->forward(v[0]); }, in, opt);
    r.post_gradcheck = gp;
    r.pre_gradcheck = gq;
    r.gradchecks_ok = gp.ok && gq.ok;
    return r;
}

ResidualStream a2_3_a2_5_residual_stream() {
    ResidualStream r;
    manual_seed(23);
    const std::size_t d = 32, depth = 8;
    Tensor x = randn({2, 6, d});
    Tensor hp = x, hq = x;
    r.post_std.push_back(stddev(x.value()));
    r.pre_std.push_back(stddev(x.value()));
    NoGradGuard no_grad;
    auto model = std::make_shared<MiniPreLNModel>(d, depth, 100);
    for (std::size_t i = 0; i < depth; ++i) {
        auto post = std::make_shared<PostLNBlock>(d);
        hp = post->forward(hp);
        hq = (*model->blocks)[i]->forward(hq);
        r.post_std.push_back(stddev(hp.value()));
        r.pre_std.push_back(stddev(hq.value()));
    }
    r.pre_final_token_std_max = xt::amax(sqrt(var(hq, {-1}, false)).value())();
    r.logits_std_with_ln_f = stddev(model->forward(x).value());
    model->use_ln_f = false;
    r.logits_std_without_ln_f = stddev(model->forward(x).value());
    return r;
}

MiniModelRun a2_6_mini_model(const std::string& fixture_dir) {
    MiniModelRun r;
    const std::size_t d = 32, n_layers = 4, vocab = 1000;
    manual_seed(0);
    auto model = std::make_shared<MiniPreLNModel>(d, n_layers, vocab);
    const Tensor x = randn({2, 6, d});
    const IndexArray target = randint(static_cast<std::int64_t>(vocab), {2, 6});

    const Tensor logits = model->forward(x);
    IndexArray flat_target = target;
    flat_target.reshape({12});
    const Tensor loss = nn::cross_entropy(reshape(logits, {-1, static_cast<long>(vocab)}), flat_target);
    loss.backward();
    r.logits_shape = logits.shape();
    r.loss = loss.item();
    r.ln_vocab = std::log(static_cast<double>(vocab));
    const auto params = model->parameters();
    r.parameter_tensors = params.size();
    for (const Tensor& p : params) r.scalars += p.numel();
    r.grad_norm = optim::grad_norm(params);
    r.all_grads_finite = std::isfinite(r.grad_norm);

    // PyTorch's run of the same article code (scripts/make_fixtures.py): load its weights, compare.
    const std::string dir = fixture_dir + "/mini_model";
    r.fixture_found = std::filesystem::exists(dir + "/loss.npy");
    if (!r.fixture_found) return r;
    NamedArrays state;
    for (const auto& [name, p] : model->named_parameters()) state.emplace_back(name, load_npy(dir + "/" + name + ".npy"));
    model->load_state_dict(state);
    model->zero_grad();
    const Tensor tx(load_npy(dir + "/x.npy"));
    IndexArray tt = load_npy_int64(dir + "/target.npy");
    tt.reshape({12});
    const Tensor tl = model->forward(tx);
    const Tensor tloss = nn::cross_entropy(reshape(tl, {-1, static_cast<long>(vocab)}), tt);
    tloss.backward();
    r.torch_loss = load_npy(dir + "/loss.npy")();
    r.our_loss_torch_weights = tloss.item();
    r.max_logits_diff = max_abs_diff(tl.value(), load_npy(dir + "/logits.npy"));
    for (const auto& [name, p] : model->named_parameters()) {
        const Array expected = load_npy(dir + "/grad." + name + ".npy");
        for (std::size_t i = 0; i < expected.size(); ++i) {
            const double diff = std::fabs(p.grad_value().data()[i] - expected.data()[i]) / std::max(1.0, std::fabs(expected.data()[i]));
            r.max_grad_rel_diff = std::max(r.max_grad_rel_diff, diff);
        }
    }
    return r;
}

LazyBuild a4_4_lazy() {
    LazyBuild r;
    auto lazy = std::make_shared<LazyLayerNorm>();
    r.built_before = lazy->built();
    Generator gen(44);
    const Tensor x = randn({3, 7, 10}, gen);
    const Tensor y = lazy->forward(x);
    r.gamma_shape = lazy->gamma.shape();
    r.beta_shape = lazy->beta.shape();
    r.max_diff_vs_layernorm = max_abs_diff(y.value(), std::make_shared<nn::LayerNorm>(10)->forward(x).value());
    try {
        lazy->forward(randn({2, 4}, gen));
    } catch (const Error& e) {
        r.mismatch_error = e.what();
    }
    return r;
}

IdentityInit a4_7_identity_init() {
    IdentityInit r;
    manual_seed(47);
    auto block = std::make_shared<TransformerBlock>(16, 4, /*pre_ln=*/true);
    const Tensor x = randn({2, 5, 16});
    r.default_change = xt::amax(xt::abs(block->forward(x).value() - x.value()))();
    for (const auto& norm : {block->norm1, block->norm2}) std::dynamic_pointer_cast<nn::LayerNorm>(norm)->weight.mutable_value().fill(0.01);
    r.small_gamma_change = xt::amax(xt::abs(block->forward(x).value() - x.value()))();
    for (const auto& norm : {block->norm1, block->norm2}) std::dynamic_pointer_cast<nn::LayerNorm>(norm)->weight.mutable_value().fill(1.0);
    block->zero_init_residual();
    const Tensor y = block->forward(x);
    r.zero_residual_change = xt::amax(xt::abs(y.value() - x.value()))();
    sum(y * randn({2, 5, 16})).backward();
    r.zeroed_weight_grad_norm = std::sqrt(xt::sum(xt::square(std::dynamic_pointer_cast<nn::Linear>((*block->ffn)[2])->weight.grad_value()))());
    return r;
}

Relatives a4_8_relatives() {
    Relatives r;
    const Tensor x{1.0, 2.0, 3.0, 4.0};
    const double d = 4;
    r.x = x.value();
    r.layer_norm = std::make_shared<nn::LayerNorm>(4)->forward(x).value();
    r.rms_norm = std::make_shared<nn::RMSNorm>(4, 1e-6)->forward(x).value();
    r.rms_by_formula = (x / sqrt(mean(x * x) + 1e-6)).value();
    r.rms_vs_formula = max_abs_diff(r.rms_norm, r.rms_by_formula);
    r.scale_norm = std::make_shared<ScaleNorm>(std::sqrt(d), 0.0)->forward(x).value();
    r.scale_vs_rms = max_abs_diff(r.scale_norm, std::make_shared<nn::RMSNorm>(4, 0.0)->forward(x).value());
    const Tensor centred = x - mean(x);
    r.ln_vs_rms_zero_mean = max_abs_diff(std::make_shared<nn::LayerNorm>(4, 0.0)->forward(centred).value(),
                                         std::make_shared<nn::RMSNorm>(4, 0.0)->forward(centred).value());

    // DeepNorm (encoder-only): alpha = (2N)^(1/4), sublayer weights scaled by beta = (8N)^(-1/4).
    const double N = static_cast<double>(r.deepnorm_layers);
    r.deepnorm_alpha = std::pow(2.0 * N, 0.25);
    r.deepnorm_beta = std::pow(8.0 * N, -0.25);
    manual_seed(48);
    auto post = std::make_shared<PostLNBlock>(32);
    auto deep = std::make_shared<DeepNormBlock>(32, r.deepnorm_alpha);
    deep->load_state_dict(post->state_dict());
    for (auto& [name, p] : deep->sub->named_parameters()) {
        if (name.find("weight") != std::string::npos) p.mutable_value() *= r.deepnorm_beta;
    }
    const Tensor h = std::make_shared<nn::LayerNorm>(32)->forward(randn({2, 6, 32}));  // a normalised stream
    auto norm = [](const Array& a) { return std::sqrt(xt::sum(xt::square(a))()); };
    r.branch_ratio_post = norm(post->sub->forward(h).value()) / norm(h.value());
    r.branch_ratio_deep = norm(deep->sub->forward(h).value()) / norm(h.value() * r.deepnorm_alpha);
    return r;
}

}  // namespace tutorial_values
