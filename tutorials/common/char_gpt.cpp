#include "tutorials/common/char_gpt.hpp"

#include <algorithm>
#include <cmath>

#include "core/io.hpp"
#include "core/ops.hpp"
#include "optim/adam.hpp"
#include "optim/clip.hpp"
#include "optim/training/progress.hpp"
#include "optim/schedule.hpp"
#include "tutorials/common/tutorial.hpp"

namespace tutorial_values {

using namespace xg;

CharCorpus::CharCorpus(const std::string& path) {
    const std::string text = read_file_bytes(path, "CharCorpus");
    if (text.size() < 2) fail("CharCorpus", path + " holds fewer than 2 characters");
    chars_ = text;
    std::sort(chars_.begin(), chars_.end());
    chars_.erase(std::unique(chars_.begin(), chars_.end()), chars_.end());
    ids_ = encode(text);
}

std::vector<std::int64_t> CharCorpus::encode(const std::string& text) const {
    std::vector<std::int64_t> ids;
    for (char c : text) {
        const auto it = std::lower_bound(chars_.begin(), chars_.end(), c);
        if (it == chars_.end() || *it != c) fail("CharCorpus::encode", std::string("character not in the vocabulary: ") + c);
        ids.push_back(it - chars_.begin());
    }
    return ids;
}

std::string CharCorpus::decode(const std::vector<std::int64_t>& ids) const {
    std::string s;
    for (std::int64_t id : ids) s += chars_.at(static_cast<std::size_t>(id));
    return s;
}

void CharCorpus::batch(std::size_t B, std::size_t T, Generator& gen, IndexArray& inputs, IndexArray& targets) const {
    if (ids_.size() <= T + 1) fail("CharCorpus::batch", "the text is shorter than one window");
    inputs = IndexArray::from_shape({B, T});
    targets = IndexArray::from_shape({B * T});
    for (std::size_t b = 0; b < B; ++b) {
        const std::size_t start = gen.randint(ids_.size() - T - 1);
        for (std::size_t t = 0; t < T; ++t) {
            inputs(b, t) = ids_[start + t];
            targets(b * T + t) = ids_[start + t + 1];
        }
    }
}

CharGPT::CharGPT(const GptConfig& c) : config(c) {
    tok_emb = register_module("tok_emb", std::make_shared<nn::Embedding>(c.vocab, c.d_model));
    pos_emb = register_module("pos_emb", std::make_shared<nn::Embedding>(c.context, c.d_model));
    // GPT-2 style small embedding init; nn::Embedding's N(0, 1) would dwarf the blocks' outputs.
    tok_emb->weight.mutable_value() *= 0.02;
    pos_emb->weight.mutable_value() *= 0.02;
    blocks = register_module("blocks", std::make_shared<nn::ModuleList>());
    for (std::size_t i = 0; i < c.n_layers; ++i) {
        blocks->push_back(std::make_shared<TransformerBlock>(c.d_model, c.n_heads, c.pre_ln, /*causal=*/true, c.rms));
    }
    if (c.pre_ln) {
        ln_f = c.rms ? std::shared_ptr<nn::Module>(std::make_shared<nn::RMSNorm>(c.d_model, 1e-5))
                     : std::shared_ptr<nn::Module>(std::make_shared<nn::LayerNorm>(c.d_model));
        register_module("ln_f", ln_f);
    }
    head = register_module("head", std::make_shared<nn::Linear>(c.d_model, c.vocab));
}

Tensor CharGPT::hidden(const IndexArray& tokens) {
    const std::size_t T = tokens.shape()[1];
    if (T > config.context) fail("CharGPT", "sequence of " + std::to_string(T) + " exceeds the context " + std::to_string(config.context));
    IndexArray positions = IndexArray::from_shape({T});
    for (std::size_t t = 0; t < T; ++t) positions(t) = static_cast<std::int64_t>(t);
    Tensor h = tok_emb->forward(tokens) + pos_emb->forward(positions);  // (B, T, d) + (T, d)
    for (std::size_t i = 0; i < blocks->size(); ++i) h = (*blocks)[i]->forward(h);
    return ln_f ? ln_f->forward(h) : h;
}

Tensor CharGPT::logits(const IndexArray& tokens) { return head->forward(hidden(tokens)); }

Tensor CharGPT::loss(const IndexArray& tokens, const IndexArray& targets) {
    return nn::cross_entropy(reshape(logits(tokens), {-1, static_cast<long>(config.vocab)}), targets);
}

std::vector<std::int64_t> CharGPT::generate(std::vector<std::int64_t> ids, std::size_t n, double temperature, Generator& gen) {
    NoGradGuard no_grad;
    for (std::size_t k = 0; k < n; ++k) {
        const std::size_t T = std::min(ids.size(), config.context);
        IndexArray window = IndexArray::from_shape({std::size_t{1}, T});
        for (std::size_t t = 0; t < T; ++t) window(0, t) = ids[ids.size() - T + t];
        const Array logit = logits(window).value();
        std::vector<double> p(config.vocab);
        double top = -INFINITY, total = 0;
        for (std::size_t v = 0; v < config.vocab; ++v) top = std::max(top, logit(0, T - 1, v) / temperature);
        for (std::size_t v = 0; v < config.vocab; ++v) total += p[v] = std::exp(logit(0, T - 1, v) / temperature - top);
        double u = gen.uniform() * total;
        std::size_t pick = 0;
        while (pick + 1 < config.vocab && (u -= p[pick]) > 0) ++pick;
        ids.push_back(static_cast<std::int64_t>(pick));
    }
    return ids;
}

TrainCurve train_char_model(CharGPT& model, const CharCorpus& corpus, std::size_t steps, std::size_t batch, double lr,
                            std::size_t warmup, std::uint64_t seed, const std::string& name, bool progress) {
    TrainCurve curve;
    curve.name = name;
    optim::AdamW opt(model.parameters(), optim::AdamWOptions(lr).betas(0.9, 0.95).weight_decay(0.01));
    optim::LinearWarmup schedule(opt, static_cast<std::int64_t>(std::max<std::size_t>(warmup, 1)));
    Generator gen(seed);
    optim::ProgressBar bar(steps, name, progress ? optim::ProgressBar::Mode::automatic : optim::ProgressBar::Mode::quiet);
    const double start = tutorial::now_seconds();
    IndexArray x, y;
    for (std::size_t step = 0; step < steps; ++step) {
        corpus.batch(batch, model.config.context, gen, x, y);
        opt.zero_grad();
        Tensor loss = model.loss(x, y);
        const double value = loss.item();
        curve.loss.push_back(value);
        bar.update(value);
        if (!std::isfinite(value)) {
            curve.diverged = true;
            break;
        }
        loss.backward();
        try {
            optim::clip_grad_norm(model.parameters(), 1.0);
        } catch (const Error&) {  // a NaN/inf gradient: the run has diverged
            curve.diverged = true;
            break;
        }
        opt.step();
        schedule.step();
    }
    bar.finish();
    curve.seconds = tutorial::now_seconds() - start;
    return curve;
}

double tail_mean(const std::vector<double>& v, std::size_t n) {
    if (v.empty()) return NAN;
    n = std::min(n, v.size());
    double s = 0;
    for (std::size_t i = v.size() - n; i < v.size(); ++i) s += v[i];
    return s / static_cast<double>(n);
}

}  // namespace tutorial_values
