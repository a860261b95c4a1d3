// Tutorial 11: a small character-level GPT (A3.4) trained on the GPL-3 text that ships with the
// machine, then the same model with RMSNorm (A3.5). Quick by default; --full trains a bigger one.
// Guide: docs/tutorials/11-char-gpt.md.
#include "tutorials/11_char_gpt/char_gpt_run.hpp"

#include <cmath>

#include <fmt/format.h>

#include "tutorials/common/tutorial.hpp"

#ifndef XGRAD_TUTORIAL_NO_MAIN  // the tests link the steps below without this main()

using namespace xg::tutorial;
namespace tv = tutorial_values;

int main(int argc, char** argv) {
    Tutorial tut(argc, argv,
                 {"11 A character-level GPT with LayerNorm and RMSNorm", "A3.4, A3.5", "docs/tutorials/11-char-gpt.md",
                  "about 20 s of CPU (one thread)", "d 64, 4 blocks, context 64, 3000 steps, lr 2e-3 (about 13 minutes of CPU)",
                  "11_char_gpt_loss.csv/.png (both loss curves)"});
    tv::CharGptRunConfig cfg;
    if (tut.full()) {
        cfg.d_model = 64;
        cfg.n_layers = 4;
        cfg.context = 64;
        cfg.steps = 3000;
        cfg.warmup = 200;
        cfg.lr = 2e-3;
    }
    tut.section("A3.4", "token + position embeddings -> Pre-LN blocks (causal attention, FFN) -> ln_f -> head");
    const tv::CharGptRun r = tv::a3_4_a3_5_char_gpt(cfg);
    tut.step(fmt::format("text {}: {} characters, vocabulary {}", cfg.text_path, r.text_chars, r.vocab));
    tut.step(fmt::format("model (d {}, {} blocks, {} heads, context {}): {} parameters", cfg.d_model, cfg.n_layers, cfg.n_heads,
                         cfg.context, r.parameters));
    tut.show(r.architecture);
    tut.step(fmt::format("training: {} steps of {} x {} characters, AdamW lr {} with {} warm-up steps, clip 1.0", cfg.steps,
                         cfg.batch, cfg.context, cfg.lr, cfg.warmup));
    auto report = [&](const tv::TrainCurve& c) {
        tut.say(fmt::format("{}: loss {} at step 1 (ln {} = {}), {} over the last 20 steps{}", c.name, num(c.loss.front(), 3),
                            r.vocab, num(r.initial_loss_expected, 3), num(tv::tail_mean(c.loss), 3), c.diverged ? " (DIVERGED)" : ""));
        fmt::print("  time: {}: {:.1f} s\n", c.name, c.seconds);
    };
    report(r.layer_norm);
    tut.step(fmt::format("sample (temperature {}, prompt \"{}\")", cfg.temperature, cfg.prompt));
    tut.show(wrap(r.sample_layer_norm, kColumns, "  | "));

    tut.section("A3.5", "the same model with RMSNorm (x / sqrt(mean(x^2) + eps) * gamma: no mean, no beta)");
    report(r.rms_norm);
    tut.step("sample");
    tut.show(wrap(r.sample_rms_norm, kColumns, "  | "));
    tut.step(fmt::format("last-20-step loss: LayerNorm {}, RMSNorm {}", num(tv::tail_mean(r.layer_norm.loss), 3),
                         num(tv::tail_mean(r.rms_norm.loss), 3)));

    std::vector<std::vector<double>> rows;
    for (std::size_t s = 0; s < cfg.steps; ++s) {
        rows.push_back({static_cast<double>(s + 1), s < r.layer_norm.loss.size() ? r.layer_norm.loss[s] : NAN,
                        s < r.rms_norm.loss.size() ? r.rms_norm.loss[s] : NAN});
    }
    const std::string csv = tut.out_path("11_char_gpt_loss.csv"), png = tut.out_path("11_char_gpt_loss.png");
    write_csv(csv, {"step", "layernorm", "rmsnorm"}, rows);
    // The two curves nearly coincide: thin raw losses, and a thick smoothed trend of each on top.
    const std::string plot = fmt::format(
        "set title 'char GPT on GPL-3: training loss (thin: per step, thick: smoothed)'\nset xlabel 'step'\n"
        "set ylabel 'cross-entropy'\nset grid\nset datafile separator ','\n"
        "plot '{0}' using 1:2 with lines lw 1 lc rgb '#a9cce3' notitle, '{0}' using 1:3 with lines lw 1 lc rgb '#f5cba7' notitle, "
        "'{0}' using 1:2 smooth bezier with lines lw 3 lc rgb '#2471a3' title 'LayerNorm', "
        "'{0}' using 1:3 smooth bezier with lines lw 3 dt 2 lc rgb '#ca6f1e' title 'RMSNorm'",
        csv);
    if (gnuplot(plot, png)) tut.say("plot: " + png);
    tut.say("csv: " + csv);
    return 0;
}

#endif  // XGRAD_TUTORIAL_NO_MAIN

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
