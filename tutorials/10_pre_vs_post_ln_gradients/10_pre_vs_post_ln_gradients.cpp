// Tutorial 10: Pre-LN vs Post-LN (A2.4, with A0.5 and A4.3). Measures the per-layer gradient norms
// of 12-block stacks at initialisation under several set-ups, then trains both with and without
// warm-up on a character-level task (the GPL-3 text). Quick by default; --full trains longer.
// Guide: docs/tutorials/10-pre-vs-post-ln-gradients.md.
#include "tutorials/10_pre_vs_post_ln_gradients/prepost.hpp"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/ops.hpp"
#include "nn/init.hpp"
#include "optim/clip.hpp"
#include "tutorials/common/tutorial.hpp"

#ifndef XGRAD_TUTORIAL_NO_MAIN  // the tests link the steps below without this main()

using namespace xg::tutorial;
namespace tv = tutorial_values;

int main(int argc, char** argv) {
    Tutorial tut(argc, argv,
                 {"10 Pre-LN vs Post-LN: gradients at init and warm-up", "A2.4 (A0.5, A4.3)",
                  "docs/tutorials/10-pre-vs-post-ln-gradients.md", "about 15 s of CPU (one thread)",
                  "1000 training steps of batch 16 per run, warm-up 200 (about 5 minutes)",
                  "10_grad_norms.csv/.png, 10_warmup_loss.csv/.png"});
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
        tut.step(fmt::format("set-up '{}': gradient norm per block, of all its parameters and of W2", setup));
        if (setup == "ce_default") tut.say("(W2: the second weight of the block's FFN, Xiong et al.'s W^2)");
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
    // One panel per set-up (their scales differ by 10 orders of magnitude), the degenerate loss
    // apart on the right; Post-LN solid and Pre-LN dashed, one colour per measured quantity.
    std::string plot = "set datafile separator ','\nset logscale y\nset format y '%.0e'\nset xtics 1,1,12\n"
                       "set xlabel 'block (1 = input side)'\nset grid\nset key top right\n"
                       "set multiplot layout 1,3 title 'gradient norm per block at initialisation, 12 blocks'\n";
    const std::vector<std::pair<std::string, std::string>> panels{
        {"ce_default", "cross-entropy, library init"}, {"ce_xavier", "cross-entropy, Xavier init (Xiong et al.)"},
        {"degenerate", "degenerate loss mean(LN(h)^2): noise"}};
    for (std::size_t p = 0; p < panels.size(); ++p) {
        const std::size_t first = 2 + 4 * p;  // columns: post_all, pre_all, post_w2, pre_w2
        plot += fmt::format("set title '{}'\nset ylabel '{}'\nplot ", panels[p].second, p == 0 ? "||gradient||" : "");
        const char* names[] = {"Post-LN all", "Pre-LN all", "Post-LN W2", "Pre-LN W2"};
        for (std::size_t k = 0; k < 4; ++k) {
            plot += fmt::format("{}'{}' using 1:{} with linespoints lw 2 pt {} dt {} lc rgb '{}' title '{}'", k ? ", " : "", grad_csv,
                                first + k, k % 2 ? 6 : 7, k % 2 ? 2 : 1, k < 2 ? "#2471a3" : "#c0392b", names[k]);
        }
        plot += "\n";
    }
    plot += "unset multiplot\n";
    if (gnuplot(plot, tut.out_path("10_grad_norms.png"), 1500, 560)) tut.say("plot: " + tut.out_path("10_grad_norms.png"));

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
    // Post-LN solid, Pre-LN dashed; one colour for "no warm-up", another for "warm-up".
    std::string lplot = "set title 'training loss, 12 blocks'\nset xlabel 'step'\nset ylabel 'cross-entropy'\nset grid\n"
                        "set datafile separator ','\nplot ";
    for (std::size_t i = 0; i < curves.size(); ++i) {
        const bool pre = curves[i].name.rfind("Pre", 0) == 0, warm = curves[i].name.find("no warm") == std::string::npos;
        lplot += fmt::format("{}'{}' using 1:{} with lines lw 2 dt {} lc rgb '{}' title '{}'", i ? ", " : "", loss_csv, i + 2,
                             pre ? 2 : 1, warm ? "#1e8449" : "#c0392b", curves[i].name);
    }
    if (gnuplot(lplot, tut.out_path("10_warmup_loss.png"))) tut.say("plot: " + tut.out_path("10_warmup_loss.png"));
    tut.say("csv: " + grad_csv + ", " + loss_csv);
    return 0;
}

#endif  // XGRAD_TUTORIAL_NO_MAIN

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

}  // namespace tutorial_values
