#include "tutorials/common/prepost.hpp"

#include <cmath>

#include "core/ops.hpp"
#include "nn/init.hpp"
#include "optim/clip.hpp"

namespace tutorial_values {

using namespace xg;

namespace {

std::shared_ptr<CharGPT> make_stack(const CharCorpus& corpus, std::size_t n_layers, std::size_t d, bool pre_ln, bool xavier,
                                    std::uint64_t seed) {
    manual_seed(seed);
    GptConfig c;
    c.vocab = corpus.vocab_size();
    c.n_layers = n_layers;
    c.d_model = d;
    c.pre_ln = pre_ln;
    auto model = std::make_shared<CharGPT>(c);
    if (xavier) {
        for (auto& [name, p] : model->named_parameters()) {
            if (p.dim() != 2) continue;
            if (name.find("emb") != std::string::npos) {
                nn::init::normal_(p);  // unit-scale inputs, as in the paper's analysis
            } else {
                nn::init::xavier_uniform_(p);
            }
        }
    }
    return model;
}

}  // namespace

GradientProfile gradient_profile(const std::string& setup, const CharCorpus& corpus, std::size_t n_layers, std::size_t d,
                                 std::size_t batches) {
    GradientProfile g;
    g.setup = setup;
    g.post_ln.assign(n_layers, 0.0);
    g.pre_ln.assign(n_layers, 0.0);
    g.post_ln_w2.assign(n_layers, 0.0);
    g.pre_ln_w2.assign(n_layers, 0.0);
    const bool xavier = setup == "ce_xavier";
    for (bool pre : {false, true}) {
        auto model = make_stack(corpus, n_layers, d, pre, xavier, 2020);
        Generator gen(77);
        std::vector<double>& out = pre ? g.pre_ln : g.post_ln;
        std::vector<double>& out_w2 = pre ? g.pre_ln_w2 : g.post_ln_w2;
        for (std::size_t b = 0; b < batches; ++b) {
            IndexArray x, y;
            corpus.batch(8, 32, gen, x, y);
            model->zero_grad();
            Tensor loss;
            if (setup == "degenerate") {
                const Tensor h = nn::functional::layer_norm(model->hidden(x), {d});
                loss = mean(h * h);  // = 1 - eps/(var + eps) per token: almost constant
            } else {
                loss = model->loss(x, y);
            }
            loss.backward();
            for (std::size_t l = 0; l < n_layers; ++l) {
                auto block = model->blocks->at<TransformerBlock>(l);
                out[l] += optim::grad_norm(block->parameters()) / batches;
                out_w2[l] += optim::grad_norm({std::dynamic_pointer_cast<nn::Linear>((*block->ffn)[2])->weight}) / batches;
            }
        }
    }
    return g;
}

std::vector<TrainCurve> warmup_runs(const CharCorpus& corpus, const WarmupConfig& cfg) {
    std::vector<TrainCurve> curves;
    for (bool pre : {false, true}) {
        for (std::size_t warmup : {std::size_t{0}, cfg.warmup}) {
            GptConfig c;
            c.vocab = corpus.vocab_size();
            c.n_layers = cfg.n_layers;
            c.d_model = cfg.d_model;
            c.n_heads = cfg.n_heads;
            c.context = cfg.context;
            c.pre_ln = pre;
            manual_seed(cfg.seed);
            CharGPT model(c);
            const std::string name = std::string(pre ? "Pre-LN" : "Post-LN") + (warmup ? " warm-up" : " no warm-up");
            curves.push_back(train_char_model(model, corpus, cfg.steps, cfg.batch, cfg.lr, warmup, cfg.seed, name, cfg.progress));
        }
    }
    return curves;
}

double tail_mean(const std::vector<double>& v, std::size_t n) {
    if (v.empty()) return NAN;
    n = std::min(n, v.size());
    double s = 0;
    for (std::size_t i = v.size() - n; i < v.size(); ++i) s += v[i];
    return s / static_cast<double>(n);
}

}  // namespace tutorial_values
