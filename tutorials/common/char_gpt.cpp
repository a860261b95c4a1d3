#include "tutorials/common/char_gpt.hpp"

#include <algorithm>
#include <cmath>

#include "core/io/io.hpp"
#include "core/ops/ops.hpp"
#include "optim/adam.hpp"
#include "optim/clip.hpp"
#include "optim/training/progress.hpp"
#include "optim/schedule.hpp"
#include "tutorials/common/tutorial.hpp"

namespace tutorial_values {

using namespace xg;

CharCorpus::CharCorpus(const std::string& path, double heldout_fraction) {
    const std::string text = read_file_bytes(path, "CharCorpus");
    if (text.size() < 2) fail("CharCorpus", path + " holds fewer than 2 characters");
    if (!(heldout_fraction >= 0.0 && heldout_fraction < 1.0)) fail("CharCorpus", "heldout_fraction must be in [0, 1)");
    chars_ = text;
    std::sort(chars_.begin(), chars_.end());
    chars_.erase(std::unique(chars_.begin(), chars_.end()), chars_.end());
    ids_ = encode(text);
    const auto kept = static_cast<std::size_t>(static_cast<double>(ids_.size()) * (1.0 - heldout_fraction));
    heldout_.assign(ids_.begin() + static_cast<std::ptrdiff_t>(kept), ids_.end());
    ids_.resize(kept);
}

void CharCorpus::heldout_batch(std::size_t T, IndexArray& inputs, IndexArray& targets) const {
    const std::size_t B = heldout_.size() > T ? (heldout_.size() - 1) / T : 0;
    if (B == 0) fail("CharCorpus::heldout_batch", "the held-out part is shorter than one window");
    inputs = IndexArray::from_shape({B, T});
    targets = IndexArray::from_shape({B * T});
    for (std::size_t b = 0; b < B; ++b) {
        for (std::size_t t = 0; t < T; ++t) {
            inputs(b, t) = heldout_[b * T + t];
            targets(b * T + t) = heldout_[b * T + t + 1];
        }
    }
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
    const NormPlacement placement = c.pre_ln ? c.placement : NormPlacement::post;
    for (std::size_t i = 0; i < c.n_layers; ++i) {
        if (placement == NormPlacement::pre || placement == NormPlacement::post) {
            blocks->push_back(std::make_shared<TransformerBlock>(c.d_model, c.n_heads, placement == NormPlacement::pre, /*causal=*/true,
                                                                 c.norm, c.qk_norm));
        } else {
            if (c.qk_norm) fail("CharGPT", "QK-norm is only wired for Pre-LN and Post-LN blocks");
            blocks->push_back(std::make_shared<TransformerBlock>(c.d_model, c.n_heads, placement, i + 1, c.n_layers, true, c.norm));
        }
    }
    const bool ends_normalised = placement == NormPlacement::post || placement == NormPlacement::deepnorm;
    if (!ends_normalised && c.use_ln_f) ln_f = register_module("ln_f", make_norm(c.norm, c.d_model));
    head = register_module("head", std::make_shared<nn::Linear>(c.d_model, c.vocab));
}

Tensor CharGPT::hidden(const IndexArray& tokens) {
    const std::size_t T = tokens.shape()[1];
    if (T > config.context) fail("CharGPT", "sequence of " + std::to_string(T) + " exceeds the context " + std::to_string(config.context));
    IndexArray positions = IndexArray::from_shape({T});
    for (std::size_t t = 0; t < T; ++t) positions(t) = static_cast<std::int64_t>(t);
    Tensor h = tok_emb->forward(tokens) + pos_emb->forward(positions);  // (B, T, d) + (T, d)
    for (std::size_t i = 0; i < blocks->size(); ++i) {
        if (skipped_block == i) continue;
        h = (*blocks)[i]->forward(h);
        if (after_block) after_block(i, h);
    }
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

double heldout_loss(CharGPT& model, const CharCorpus& corpus) {
    NoGradGuard no_grad;
    IndexArray x, y;
    corpus.heldout_batch(model.config.context, x, y);
    return model.loss(x, y).item();
}

double max_attention_logit(const CharGPT& model) {
    double top = -INFINITY;
    for (std::size_t i = 0; i < model.blocks->size(); ++i) {
        top = std::max(top, model.blocks->at<TransformerBlock>(i)->attn->last_max_logit());
    }
    return top;
}

TrainCurve train_char_model(CharGPT& model, const CharCorpus& corpus, std::size_t steps, std::size_t batch, double lr,
                            std::size_t warmup, std::uint64_t seed, const std::string& name, bool progress) {
    TrainOptions o;
    o.steps = steps;
    o.batch = batch;
    o.lr = lr;
    o.warmup = warmup;
    o.seed = seed;
    o.name = name;
    o.progress = progress;
    return train_char_model(model, corpus, o);
}

TrainCurve train_char_model(CharGPT& model, const CharCorpus& corpus, const TrainOptions& o) {
    TrainCurve curve;
    curve.name = o.name;
    optim::AdamW opt(model.parameters(), optim::AdamWOptions(o.lr).betas(0.9, 0.95).weight_decay(0.01));
    optim::LinearWarmup schedule(opt, static_cast<std::int64_t>(std::max<std::size_t>(o.warmup, 1)));
    Generator gen(o.seed);
    optim::ProgressBar bar(o.steps, o.name, o.progress ? optim::ProgressBar::Mode::automatic : optim::ProgressBar::Mode::quiet);
    const double start = tutorial::now_seconds();
    std::vector<double> step_seconds;
    IndexArray x, y;
    for (std::size_t step = 0; step < o.steps; ++step) {
        const double step_start = tutorial::now_seconds();
        corpus.batch(o.batch, model.config.context, gen, x, y);
        opt.zero_grad();
        Tensor loss = model.loss(x, y);
        const double value = loss.item();
        curve.loss.push_back(value);
        bar.update(value);
        if (o.after_forward) o.after_forward(step, value);
        if (!std::isfinite(value)) {
            curve.diverged = true;
            break;
        }
        loss.backward();
        try {
            if (o.clip > 0) {
                optim::clip_grad_norm(model.parameters(), o.clip);
            } else if (!std::isfinite(optim::grad_norm(model.parameters()))) {
                fail("train_char_model", "non-finite gradient");
            }
        } catch (const Error&) {  // a NaN/inf gradient: the run has diverged
            curve.diverged = true;
            break;
        }
        opt.step();
        schedule.step();
        step_seconds.push_back(tutorial::now_seconds() - step_start);
    }
    bar.finish();
    curve.seconds = tutorial::now_seconds() - start;
    if (!step_seconds.empty()) {
        std::nth_element(step_seconds.begin(), step_seconds.begin() + step_seconds.size() / 2, step_seconds.end());
        curve.median_step_seconds = step_seconds[step_seconds.size() / 2];
    }
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
