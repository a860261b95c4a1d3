#include "tutorials/common/blocks_demo.hpp"

#include <cmath>
#include <filesystem>

#include <xtensor/xmath.hpp>

#include "core/gradcheck.hpp"
#include "core/io.hpp"
#include "core/ops.hpp"
#include "core/random.hpp"
#include "optim/clip.hpp"
#include "tutorials/common/blocks.hpp"
#include "tutorials/common/tutorial.hpp"

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
