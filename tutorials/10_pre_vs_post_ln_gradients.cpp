// Tutorial 10: Pre-LN vs Post-LN (A2.4, with A0.5 and A4.3). Measures the per-layer gradient norms
// of 12-block stacks at initialisation under several set-ups, then trains both with and without
// warm-up on a character-level task (the GPL-3 text). Quick by default; --full trains longer.
// Guide: docs/tutorials/10-pre-vs-post-ln-gradients.md.
#include <algorithm>

#include <fmt/format.h>

#include "tutorials/common/prepost.hpp"
#include "tutorials/common/tutorial.hpp"

using namespace xg::tutorial;
namespace tv = tutorial_values;

int main(int argc, char** argv) {
    Tutorial tut(argc, argv, "10 Pre-LN vs Post-LN: gradients at init and warm-up", "A2.4 (A0.5, A4.3)");
    const tv::CharCorpus corpus("/usr/share/common-licenses/GPL-3");
    const std::size_t L = 12, d = 32;

    tut.section("A2.4", "per-block gradient norms at initialisation, 12 blocks, d 32, 4 heads, causal attention");
    tut.say(fmt::format("input: 8 random windows of 32 characters of GPL-3 (vocabulary {}), averaged over 3 batches", corpus.vocab_size()));
    std::vector<std::string> header{"block"};
    std::vector<std::vector<double>> csv(L);
    for (std::size_t l = 0; l < L; ++l) csv[l].push_back(static_cast<double>(l + 1));
    for (const std::string setup : {"ce_default", "ce_xavier", "degenerate"}) {
        const tv::GradientProfile g = tv::gradient_profile(setup, corpus, L, d);
        std::vector<std::vector<std::string>> rows{{"block", "Post-LN all", "Pre-LN all", "Post-LN W2", "Pre-LN W2"}};
        for (std::size_t l = 0; l < L; ++l) {
            rows.push_back({std::to_string(l + 1), sci(g.post_ln[l], 2), sci(g.pre_ln[l], 2), sci(g.post_ln_w2[l], 2),
                            sci(g.pre_ln_w2[l], 2)});
            csv[l].insert(csv[l].end(), {g.post_ln[l], g.pre_ln[l], g.post_ln_w2[l], g.pre_ln_w2[l]});
        }
        for (const char* k : {"_post_all", "_pre_all", "_post_w2", "_pre_w2"}) header.push_back(setup + k);
        tut.step(fmt::format("set-up '{}': gradient norm of all block parameters, and of the FFN's second weight W2", setup));
        tut.show(table(rows));
        tut.say(fmt::format("W2 last/first block: Post-LN {}, Pre-LN {}; max/min over blocks: Post-LN {}, Pre-LN {}",
                            num(g.post_ln_w2[L - 1] / g.post_ln_w2[0], 2), num(g.pre_ln_w2[L - 1] / g.pre_ln_w2[0], 2),
                            num(*std::max_element(g.post_ln_w2.begin(), g.post_ln_w2.end()) /
                                    *std::min_element(g.post_ln_w2.begin(), g.post_ln_w2.end()), 2),
                            num(*std::max_element(g.pre_ln_w2.begin(), g.pre_ln_w2.end()) /
                                    *std::min_element(g.pre_ln_w2.begin(), g.pre_ln_w2.end()), 2)));
    }
    const std::string grad_csv = tut.out_path("10_grad_norms.csv");
    write_csv(grad_csv, header, csv);
    std::string plot = "set title 'gradient norm per block at init (12 blocks)'\nset xlabel 'block (1 = input side)'\n"
                       "set ylabel '||grad||'\nset logscale y\nset key outside right\nset datafile separator ','\nplot ";
    for (std::size_t i = 1; i < header.size(); ++i) {
        plot += fmt::format("{}'{}' using 1:{} with linespoints title '{}'", i > 1 ? ", " : "", grad_csv, i + 1, header[i]);
    }
    if (gnuplot(plot, tut.out_path("10_grad_norms.png"))) tut.say("plot: " + tut.out_path("10_grad_norms.png"));

    tut.section("A2.4 / A0.5", "training both with and without warm-up (AdamW, clip 1.0)");
    tv::WarmupConfig cfg;
    if (tut.full()) {
        cfg.steps = 1000;
        cfg.warmup = 200;
        cfg.batch = 16;
    }
    tut.step(fmt::format("{} steps, batch {} x {} characters, lr {}, warm-up {} steps (linear)", cfg.steps, cfg.batch, cfg.context,
                         cfg.lr, cfg.warmup));
    const std::vector<tv::TrainCurve> curves = tv::warmup_runs(corpus, cfg);
    std::vector<std::vector<std::string>> rows{{"run", "loss at step 10", "at 50", "mean of last 20", "diverged"}};
    for (const auto& c : curves) {
        auto at = [&](std::size_t i) { return i < c.loss.size() ? num(c.loss[i], 3) : std::string("-"); };
        rows.push_back({c.name, at(9), at(49), num(tv::tail_mean(c.loss), 3), c.diverged ? "yes" : "no"});
    }
    tut.show(table(rows));
    for (const auto& c : curves) fmt::print("  time: {}: {:.1f} s\n", c.name, c.seconds);
    std::vector<std::vector<double>> loss_rows;
    for (std::size_t s = 0; s < cfg.steps; ++s) {
        std::vector<double> r{static_cast<double>(s + 1)};
        for (const auto& c : curves) r.push_back(s < c.loss.size() ? c.loss[s] : NAN);
        loss_rows.push_back(r);
    }
    const std::string loss_csv = tut.out_path("10_warmup_loss.csv");
    write_csv(loss_csv, {"step", "post_no_warmup", "post_warmup", "pre_no_warmup", "pre_warmup"}, loss_rows);
    std::string lplot = "set title 'training loss, 12 blocks'\nset xlabel 'step'\nset ylabel 'cross-entropy'\n"
                        "set datafile separator ','\nplot ";
    for (std::size_t i = 0; i < curves.size(); ++i) {
        lplot += fmt::format("{}'{}' using 1:{} with lines title '{}'", i ? ", " : "", loss_csv, i + 2, curves[i].name);
    }
    if (gnuplot(lplot, tut.out_path("10_warmup_loss.png"))) tut.say("plot: " + tut.out_path("10_warmup_loss.png"));
    tut.say("csv: " + grad_csv + ", " + loss_csv);
    return 0;
}
