#include "tutorials/common/char_gpt_run.hpp"

#include <cmath>

namespace tutorial_values {

using namespace xg;

CharGptRun a3_4_a3_5_char_gpt(const CharGptRunConfig& cfg) {
    CharGptRun r;
    const CharCorpus corpus(cfg.text_path);
    r.vocab = corpus.vocab_size();
    r.text_chars = corpus.size();
    r.initial_loss_expected = std::log(static_cast<double>(r.vocab));
    for (bool rms : {false, true}) {
        GptConfig c;
        c.vocab = corpus.vocab_size();
        c.context = cfg.context;
        c.d_model = cfg.d_model;
        c.n_layers = cfg.n_layers;
        c.n_heads = cfg.n_heads;
        c.pre_ln = true;
        c.rms = rms;
        manual_seed(cfg.seed);  // the same initial weights for both (norm layers have no random init)
        CharGPT model(c);
        if (!rms) {
            r.architecture = model.to_string();
            for (const Tensor& p : model.parameters()) r.parameters += p.numel();
        }
        TrainCurve curve = train_char_model(model, corpus, cfg.steps, cfg.batch, cfg.lr, cfg.warmup, cfg.seed,
                                            rms ? "GPT with RMSNorm" : "GPT with LayerNorm", cfg.progress);
        Generator gen(cfg.seed + 1);
        const std::string sample = corpus.decode(model.generate(corpus.encode(cfg.prompt), cfg.sample_chars, cfg.temperature, gen));
        (rms ? r.rms_norm : r.layer_norm) = std::move(curve);
        (rms ? r.sample_rms_norm : r.sample_layer_norm) = sample;
    }
    return r;
}

}  // namespace tutorial_values
