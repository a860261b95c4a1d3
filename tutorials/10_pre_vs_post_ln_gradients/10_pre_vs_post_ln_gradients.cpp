// Tutorial 10: Pre-LN vs Post-LN (A2.4, with A0.5 and A4.3). Measures the per-layer gradient norms
// of 12-block stacks at initialisation under several set-ups (read through gradient hooks, over 3
// seeds), then sweeps learning rate x depth x warm-up x clipping for both placements on a
// character-level task (the GPL-3 text). Quick by default (a corner of the sweep); --full sweeps all.
// Guide: docs/tutorials/10-pre-vs-post-ln-gradients.md.
#include "tutorials/10_pre_vs_post_ln_gradients/prepost.hpp"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/ops/ops.hpp"
#include "nn/modules/init.hpp"
#include "optim/adam.hpp"
#include "optim/clip.hpp"
#include "optim/schedule.hpp"
#include "optim/training/progress.hpp"
#include "tutorials/common/seed_stats.hpp"
#include "tutorials/common/tutorial.hpp"

using namespace xg::tutorial;
namespace tv = tutorial_values;

namespace {

std::string with_sd(double mean, double sd) { return sci(mean, 2) + " ± " + sci(sd, 1); }

// "2.51 ± 0.01" over the seeds that did not diverge, ", k div" appended when k of them diverged.
std::string sweep_cell(const tv::SweepCell& c) {
    const std::size_t k = c.n_diverged(), n = c.diverged.size();
    if (k == n) return "all div";
    std::string s = num(c.mean_final(), 2);
    if (n - k > 1) s += " ± " + num(c.sd_final(), 2);
    if (k) s += fmt::format(", {} div", k);
    return s;
}

std::string lr_label(double lr) { return fmt::format("lr {:.0e}", lr); }

const tv::SweepCell* find_cell(const std::vector<tv::SweepCell>& cells, bool pre, bool warmup, std::size_t depth, double lr) {
    for (const auto& c : cells)
        if (c.pre_ln == pre && c.warmup == warmup && !c.clip && c.depth == depth && c.lr == lr) return &c;
    return nullptr;
}

// "grows", "falls" or "no trend beyond the spread": the direction of a paired difference, said
// only when it stands out of the seeds' spread.
std::string trend(const tv::PairedDifference& d) {
    return !d.significant ? "no trend beyond the spread" : d.mean > 0 ? "grows" : "falls";
}

// A2.4's verdict on the profiles: W2's gradient norm at the last block against the first, seed by
// seed (the same seed: the same initialisation and batches). The claim's pattern is Post-LN
// growing toward the output while Pre-LN's stays level. The degenerate loss has no say: noise.
void gradient_verdict(Tutorial& tut, const std::vector<tv::GradientProfile>& profiles, std::size_t L) {
    tut.conclude("Post-LN's gradients grow toward the output, Pre-LN's stay level? W2's gradient norm,");
    tut.say(fmt::format("   block {} minus block 1, seed by seed (the degenerate loss left out: its gradients are noise):", L));
    auto last_minus_first = [L](const std::vector<std::vector<double>>& per_seed) {
        std::vector<double> first, last;
        for (const auto& blocks : per_seed) first.push_back(blocks.front()), last.push_back(blocks[L - 1]);
        return tv::paired_difference(first, last);
    };
    std::vector<std::string> summary, pattern;
    for (const auto& g : profiles) {
        if (g.setup == "degenerate") continue;
        const tv::PairedDifference post = last_minus_first(g.post_ln_w2_per_seed), pre = last_minus_first(g.pre_ln_w2_per_seed);
        tut.say("   " + tv::describe(post, g.setup + " Post-LN " + std::to_string(L), "1", 2));
        tut.say("   " + tv::describe(pre, g.setup + " Pre-LN " + std::to_string(L), "1", 2));
        summary.push_back(fmt::format("   {}: Post-LN {}, Pre-LN {}", g.setup, trend(post), trend(pre)));
        if (post.significant && post.mean > 0 && !pre.significant) pattern.push_back(g.setup);
    }
    for (const auto& line : summary) tut.say(line);
    std::string where;
    for (const auto& p : pattern) where += (where.empty() ? "" : ", ") + p;
    tut.say(fmt::format("   the claim's pattern, Post-LN growing and Pre-LN without trend, shows in: {}",
                        where.empty() ? "neither set-up" : where));
    const std::size_t setups = summary.size();
    tut.say(pattern.empty()                ? "   A2.4's gradient pattern: does not hold in these set-ups (12 blocks, 3 seeds)"
            : pattern.size() == setups ? "   A2.4's gradient pattern: holds in every set-up"
                                       : "   A2.4's gradient pattern: partly, in " + where + " only");
}

// The sweep's verdicts compare the placements cell by cell: Pre-LN minus Post-LN final loss, seed
// by seed, in every setting (warm-up, clipping, depth, learning rate) where no seed diverged.
struct Tally {
    std::size_t pre_lower = 0, post_lower = 0, within = 0, diverged = 0;
    std::size_t settings() const { return pre_lower + post_lower + within + diverged; }
    void add(const tv::SweepCell& post, const tv::SweepCell& pre) {
        if (post.n_diverged() || pre.n_diverged() || post.final_loss.size() < 2) {
            ++diverged;
            return;
        }
        const tv::PairedDifference d = tv::paired_difference(post.final_loss, pre.final_loss);
        ++(!d.significant ? within : d.mean < 0 ? pre_lower : post_lower);
    }
    std::string line(const std::string& label) const {
        return fmt::format("   {}: Pre-LN lower in {}, Post-LN lower in {}, within the spread in {}{}", label, pre_lower,
                           post_lower, within, diverged ? fmt::format(", a seed diverged in {}", diverged) : "");
    }
};

const tv::SweepCell& partner(const std::vector<tv::SweepCell>& cells, const tv::SweepCell& c) {
    for (const auto& o : cells)
        if (o.pre_ln != c.pre_ln && o.warmup == c.warmup && o.clip == c.clip && o.depth == c.depth && o.lr == c.lr) return o;
    xg::fail("10_pre_vs_post_ln_gradients", "a sweep cell without its other placement");
}

// Where the articles disagree (claims.md): 000 and 002 say Pre-LN needs no warm-up, 004 that it
// may need its warm-up tuned because its early updates are too weak. Said here, after the sweep
// that decides it at this scale: Pre-LN's runs without warm-up, and the settings where a warm-up
// lowers its final loss beyond the seed spread (the same seeds, the same batches).
void warmup_disagreement(Tutorial& tut, const std::vector<tv::SweepCell>& cells, bool quick) {
    std::size_t runs = 0, diverged = 0, settings = 0, helped = 0;
    for (const auto& off : cells) {
        if (!off.pre_ln || off.warmup) continue;
        runs += off.diverged.size();
        diverged += off.n_diverged();
        for (const auto& on : cells) {
            if (!on.pre_ln || !on.warmup || on.clip != off.clip || on.depth != off.depth || on.lr != off.lr) continue;
            ++settings;
            if (off.n_diverged() || on.n_diverged() || off.final_loss.size() < 2) continue;
            const tv::PairedDifference d = tv::paired_difference(off.final_loss, on.final_loss);
            helped += d.significant && d.mean < 0;
        }
    }
    tut.article_note("Pre-LN needs no warm-up (000, 002); it may need one tuned, early updates too weak (004)",
                     fmt::format("no warm-up: {} of {} Pre-LN runs diverged; warm-up lowers its loss in {} of {} settings",
                                 diverged, runs, helped, settings),
                     std::string("the articles disagree; ") + (diverged == 0 ? "000/002 hold here" : "000/002 do not hold here") +
                         (helped > 0 ? "; 004 has a point too (beyond the seed spread)" : "; 004's case: no gain beyond the seed spread"));
    // The means tell more at the largest rate (guide 10): the quick run points there.
    if (quick) {
        fmt::print("  Note: --full (seeds 1, 2, 3; run of 2026-12-05, guide 10): 0 of 96 diverged, a gain in 0 of 32;\n"
                   "  Note: yet at lr 3e-2 its mean final loss falls with warm-up at every depth (guide 10)\n");
    }
}

// A0.5 and A4.3's verdicts: divergence, then the placements compared per depth (A4.3: easier to
// train deep) and per learning rate (A0.5: more robust to the learning rate).
void sweep_verdict(Tutorial& tut, const tv::SweepConfig& cfg, const std::vector<tv::SweepCell>& cells) {
    std::size_t runs = 0, post_div = 0, pre_div = 0, post_div_nowarm = 0, pre_div_nowarm = 0;
    for (const auto& c : cells) {
        if (!c.pre_ln) runs += c.diverged.size();
        (c.pre_ln ? pre_div : post_div) += c.n_diverged();
        if (!c.warmup) (c.pre_ln ? pre_div_nowarm : post_div_nowarm) += c.n_diverged();
    }
    tut.conclude(fmt::format("runs that diverged: Post-LN {} of {} ({} without warm-up), Pre-LN {} of {} ({})", post_div, runs,
                             post_div_nowarm, pre_div, runs, pre_div_nowarm));
    tut.say(std::string("   Pre-LN trains without warm-up (A0.5): ") +
            (pre_div_nowarm == 0 ? "holds, no run of it diverged" : "not at every setting"));
    tut.say(std::string("   Post-LN ") + (post_div_nowarm > pre_div_nowarm ? "diverges more often without it"
                                                                           : "diverges no more often without it: they differ in the loss"));

    std::vector<Tally> by_depth(cfg.depths.size()), by_lr(cfg.lrs.size());
    Tally deep, shallow;
    for (const auto& c : cells) {
        if (!c.pre_ln) continue;
        const tv::SweepCell& post = partner(cells, c);
        for (std::size_t i = 0; i < cfg.depths.size(); ++i)
            if (cfg.depths[i] == c.depth) by_depth[i].add(post, c);
        for (std::size_t i = 0; i < cfg.lrs.size(); ++i)
            if (cfg.lrs[i] == c.lr) by_lr[i].add(post, c);
        (c.depth > 6 ? deep : shallow).add(post, c);
    }
    tut.conclude("Pre-LN easier to train deep (A4.3)? final loss, Pre-LN - Post-LN seed by seed (paired t, 95 %),");
    tut.say(fmt::format("   in each depth's {} settings (learning rate, warm-up, clipping):", by_depth.front().settings()));
    for (std::size_t i = 0; i < cfg.depths.size(); ++i) tut.say(by_depth[i].line(fmt::format("depth {:>2}", cfg.depths[i])));
    if (deep.settings() == 0) {
        tut.say(fmt::format("   no depth above 6 here ({} steps): this run cannot decide; --full (depths 2-24, 120", cfg.steps));
        tut.say("   steps, seeds 1, 2, 3; run of 2026-12-03, guide 10) found above 6 blocks Pre-LN lower in 15");
        tut.say("   of 32 settings, Post-LN in 4: A4.3 held there");
    } else {
        tut.say(fmt::format("   above 6 blocks Pre-LN is lower in {} of {} settings, Post-LN in {}: {}", deep.pre_lower, deep.settings(),
                            deep.post_lower, deep.pre_lower > deep.post_lower ? "holds, as A4.3 says" : "does not hold"));
        tut.say(fmt::format("   (at 6 or fewer: Pre-LN lower in {} of {}, Post-LN in {})", shallow.pre_lower, shallow.settings(),
                            shallow.post_lower));
    }
    tut.conclude("Pre-LN more robust to the learning rate (A0.5)? the same comparison per learning rate,");
    tut.say(fmt::format("   in each one's {} settings (depth, warm-up, clipping):", by_lr.front().settings()));
    for (std::size_t i = 0; i < cfg.lrs.size(); ++i) tut.say(by_lr[i].line(lr_label(cfg.lrs[i])));
    const Tally &low = by_lr.front(), &high = by_lr.back();
    const bool post_suffers = high.pre_lower > low.pre_lower && high.pre_lower > high.post_lower;
    tut.say(fmt::format("   Pre-LN lower in {} of {} settings at {}, in {} at {}:", low.pre_lower, low.settings(),
                        lr_label(cfg.lrs.front()), high.pre_lower, lr_label(cfg.lrs.back())));
    if (deep.settings() == 0) {
        // Two rates, depths 2 and 6 and 30 steps: the --full sweep (guide 10) finds A0.5 holding,
        // which a quick "no sign" would contradict; the quick run hands the verdict to it.
        tut.say(fmt::format("   {} rates, depths up to 6 and {} steps cannot decide ({})", cfg.lrs.size(), cfg.steps,
                            post_suffers ? "Post-LN suffers more from a large rate here" : "Post-LN is not the more sensitive here"));
        tut.say("   --full (4 rates, depths 2-24, 120 steps, seeds 1, 2, 3; run of 2026-12-03,");
        tut.say("   guide 10) found: at lr 1e-03 Pre-LN lower in 1 of 16 settings, Post-LN in 6; at lr 3e-02");
        tut.say("   Pre-LN in 4, Post-LN in 3: Post-LN suffers more from a large rate, A0.5 held there");
    } else {
        tut.say(post_suffers ? "   holds: Post-LN suffers more from a large rate, as A0.5 says"
                             : "   not shown: no sign that Post-LN is the more sensitive");
    }
    warmup_disagreement(tut, cells, deep.settings() == 0);
}

// A2.4's last example: loss against step with and without warm-up, for both placements, read from
// the sweep's own runs (clipping off, so that warm-up is the only help). The depth and learning
// rate are the sweep's setting where warm-up lowers Post-LN's final loss most.
void warmup_curves(Tutorial& tut, const tv::SweepConfig& cfg, const std::vector<tv::SweepCell>& cells,
                   const std::string& seed_list) {
    tut.section("A2.4", "training loss against step, with and without warm-up (the sweep's runs, clipping off)");
    std::size_t depth = 0;
    double lr = 0, best_gain = -INFINITY;
    for (std::size_t d : cfg.depths) {
        for (double l : cfg.lrs) {
            const double gain = find_cell(cells, false, false, d, l)->mean_final() - find_cell(cells, false, true, d, l)->mean_final();
            if (std::isfinite(gain) && gain > best_gain) best_gain = gain, depth = d, lr = l;
        }
    }
    if (depth == 0) {
        tut.say("no depth and learning rate where Post-LN kept a finite loss with and without warm-up: no curves");
        return;
    }
    tut.say(fmt::format("depth {}, {}: of the sweep's settings (clipping off), the one where warm-up lowers Post-LN's",
                        depth, lr_label(lr)));
    tut.say(fmt::format("final loss most ({} -> {}), so the one where a difference can show. Picked as the",
                        num(find_cell(cells, false, false, depth, lr)->mean_final(), 2),
                        num(find_cell(cells, false, true, depth, lr)->mean_final(), 2)));
    tut.say("largest of several, its gain is an upper estimate. Every setting of a seed sees the same");
    tut.say(fmt::format("batches; warm-up: linear over {} steps. Loss of the step's batch, mean ± std over seeds {}.",
                        cfg.warmup, seed_list));
    struct Curve {
        const char* name;
        const tv::SweepCell* cell;
        std::vector<double> mean, sd;
    };
    std::vector<Curve> curves{{"Post", find_cell(cells, false, false, depth, lr), {}, {}},
                              {"Post", find_cell(cells, false, true, depth, lr), {}, {}},
                              {"Pre", find_cell(cells, true, false, depth, lr), {}, {}},
                              {"Pre", find_cell(cells, true, true, depth, lr), {}, {}}};
    for (auto& c : curves) tv::loss_curve(*c.cell, cfg.steps, c.mean, c.sd);

    // Step 1 comes before any update: the same for both warm-up settings, so it is printed once.
    tut.step(fmt::format("loss at step 1 (before any update): Post-LN {}, Pre-LN {}", num(curves[0].mean[0], 2) + " ± " +
                         num(curves[0].sd[0], 2), num(curves[2].mean[0], 2) + " ± " + num(curves[2].sd[0], 2)));
    const std::vector<std::size_t> shown{cfg.warmup / 2, cfg.warmup, (cfg.warmup + cfg.steps) / 2, cfg.steps};
    tut.say(fmt::format("then at steps {}, {}, {}, {}; final = mean of the last {} steps (the sweep's final loss):", shown[0],
                        shown[1], shown[2], shown[3], cfg.tail));
    std::vector<std::vector<std::string>> rows{{"LN", "warm-up"}};
    for (std::size_t t : shown) rows[0].push_back(fmt::format("step {}", t));
    rows[0].push_back("final");
    auto cell_text = [](double mean, double sd) {
        if (!std::isfinite(mean)) return std::string("div");
        return std::isfinite(sd) ? num(mean, 2) + " ± " + num(sd, 2) : num(mean, 2);
    };
    for (const auto& c : curves) {
        std::vector<std::string> row{c.name, c.cell->warmup ? "on" : "off"};
        for (std::size_t t : shown) row.push_back(cell_text(c.mean[t - 1], c.sd[t - 1]));
        row.push_back(c.cell->n_diverged() ? sweep_cell(*c.cell) : cell_text(c.cell->mean_final(), c.cell->sd_final()));
        rows.push_back(row);
    }
    tut.show(table(rows));

    // The verdict: warm-up minus no warm-up, seed by seed (the same seed: same init and batches).
    tut.say("final loss, warm-up minus none, seed by seed:");
    std::vector<tv::PairedDifference> diffs;
    for (std::size_t k = 0; k < 4; k += 2) {
        const tv::SweepCell &off = *curves[k].cell, &on = *curves[k + 1].cell;
        if (off.n_diverged() || on.n_diverged() || off.final_loss.size() < 2) continue;
        diffs.push_back(tv::paired_difference(off.final_loss, on.final_loss));
        tut.say(tv::describe(diffs.back(), std::string(k ? "Pre-LN: " : "Post-LN: ") + "warm-up", "none", 2));
    }
    if (diffs.size() == 2) {
        auto verdict = [](const tv::PairedDifference& d) {
            return fmt::format("{} ± {} ({} the seed spread)", num(d.mean, 2), num(d.std, 2), d.significant ? "beyond" : "within");
        };
        tut.conclude("warm-up changes the final loss by " + verdict(diffs[0]) + " for Post-LN,");
        tut.say("   by " + verdict(diffs[1]) + " for Pre-LN");
        if (!tut.full()) tut.say("   (--full, 6 blocks, lr 1e-02, 120 steps: -0.21 ± 0.20 and -0.12 ± 0.08, both within the spread)");
    } else {
        tut.conclude("some runs diverged: the table above says which; no paired comparison of the final losses");
    }
    std::size_t post_runs = 0, post_diverged = 0;
    for (const auto& c : cells) {
        if (c.pre_ln || c.warmup) continue;
        post_runs += c.diverged.size();
        post_diverged += c.n_diverged();
    }
    tut.conclude(post_diverged == 0
                     ? fmt::format("\"Post-LN needs a warm-up\" (A2.4): not shown, {} of its {} runs without it diverged;",
                                   post_diverged, post_runs)
                     : fmt::format("\"Post-LN needs a warm-up\" (A2.4): cannot decide from {} diverged runs of {} alone;",
                                   post_diverged, post_runs));
    tut.say(fmt::format("   {} steps x {} seeds can say whether warm-up lowers the loss at this one setting, not", cfg.steps,
                        cfg.seeds.size()));
    tut.say("   whether Post-LN needs it to train nor where longer runs end");

    // CSV: per step, mean and std of each curve, then every seed's loss; the plot: one panel per
    // placement, the mean as a line and mean ± std as a band, red without warm-up, green with it.
    std::vector<std::string> header{"step"};
    for (const char* k : {"post_nowarmup", "post_warmup", "pre_nowarmup", "pre_warmup"}) {
        header.push_back(std::string(k) + "_mean");
        header.push_back(std::string(k) + "_sd");
    }
    for (const char* k : {"post_nowarmup", "post_warmup", "pre_nowarmup", "pre_warmup"})
        for (std::uint64_t seed : cfg.seeds) header.push_back(fmt::format("{}_seed{}", k, seed));
    std::vector<std::vector<double>> rows_csv;
    double lowest = INFINITY, highest = -INFINITY;
    for (std::size_t t = 0; t < cfg.steps; ++t) {
        std::vector<double> r{static_cast<double>(t + 1)};
        for (const auto& c : curves) {
            r.insert(r.end(), {c.mean[t], c.sd[t]});
            const double sd = std::isfinite(c.sd[t]) ? c.sd[t] : 0.0;
            if (std::isfinite(c.mean[t])) lowest = std::min(lowest, c.mean[t] - sd), highest = std::max(highest, c.mean[t] + sd);
        }
        for (const auto& c : curves)
            for (const auto& run : c.cell->losses) r.push_back(t < run.size() ? run[t] : NAN);
        rows_csv.push_back(r);
    }
    const std::string csv = tut.out_path("10_warmup_curves.csv");
    write_csv(csv, header, rows_csv);
    std::string plot = fmt::format("set datafile separator ','\nset grid\nset xlabel 'step'\nset ylabel 'training loss'\n"
                                   "set xrange [1:{}]\nset yrange [{}:{}]\nset key top right\n"
                                   "set arrow 1 from {}, graph 0 to {}, graph 1 nohead dt 3 lc rgb '#555555'\n"
                                   "set multiplot layout 1,2 title 'training loss, {} blocks, {}, clipping off: mean and "
                                   "± 1 std over seeds {} (dotted: end of warm-up)'\n",
                                   cfg.steps, lowest - 0.02, highest + 0.02, cfg.warmup, cfg.warmup, depth, lr_label(lr), seed_list);
    for (std::size_t p = 0; p < 2; ++p) {
        plot += fmt::format("set title '{}'\nplot ", p ? "Pre-LN" : "Post-LN");
        for (std::size_t w = 0; w < 2; ++w) {
            const std::size_t mean_col = 2 + 2 * (2 * p + w);
            const char* colour = w ? "#1e8449" : "#c0392b";
            plot += fmt::format("{}'{}' using 1:(${}-${}):(${}+${}) with filledcurves fs transparent solid 0.2 noborder "
                                "lc rgb '{}' notitle, '{}' using 1:{} with lines lw 2 lc rgb '{}' title '{}'",
                                w ? ", " : "", csv, mean_col, mean_col + 1, mean_col, mean_col + 1, colour, csv, mean_col, colour,
                                w ? "warm-up" : "no warm-up");
        }
        plot += "\n";
    }
    plot += "unset multiplot\n";
    if (gnuplot(plot, tut.out_path("10_warmup_curves.png"), 1400, 560, seed_list)) tut.say("plot: " + tut.out_path("10_warmup_curves.png"));
    tut.say("csv: " + csv);
}

}  // namespace

int main(int argc, char** argv) {
    Tutorial tut(argc, argv,
                 {"10 Pre-LN vs Post-LN: gradients at init, learning rate x depth", "A2.4 (A0.5, A4.3)",
                  "docs/tutorials/10-pre-vs-post-ln-gradients.md", "about 10 s of CPU (one thread)",
                  "the sweep at 4 learning rates x depths 2, 6, 12, 24, 120 steps per run (about 4 minutes of CPU)",
                  "10_grad_norms.csv/.png, 10_sweep.csv/.png, 10_warmup_curves.csv/.png"});
    const tv::CharCorpus corpus("/usr/share/common-licenses/GPL-3");
    const std::size_t L = 12, d = 32;

    tut.section("A2.4", "per-block gradient norms at initialisation, 12 blocks, d 32, 4 heads, causal attention");
    tut.say(fmt::format("input: 8 random windows of 32 characters of GPL-3 (vocabulary {}), averaged over 3 batches;",
                        corpus.vocab_size()));
    tut.say("mean ± std over 3 seeds (2020, 2021, 2022: initialisation and batches)");
    tut.say("read by gradient hooks: Tensor::register_hook on every parameter of every block");
    std::vector<std::string> header{"block"};
    std::vector<std::vector<double>> csv(L);
    for (std::size_t l = 0; l < L; ++l) csv[l].push_back(static_cast<double>(l + 1));
    double hook_vs_grad = 0;
    std::vector<tv::GradientProfile> profiles;
    for (const std::string setup : {"ce_default", "ce_xavier", "degenerate"}) {
        profiles.push_back(tv::gradient_profile(setup, corpus, L, d));
        const tv::GradientProfile& g = profiles.back();
        hook_vs_grad = std::max(hook_vs_grad, g.hook_vs_grad);
        std::vector<std::vector<std::string>> rows{{"block", "Post-LN all", "Pre-LN all", "Post-LN W2", "Pre-LN W2"}};
        for (std::size_t l = 0; l < L; ++l) {
            rows.push_back({std::to_string(l + 1), with_sd(g.post_ln[l], g.post_ln_sd[l]), with_sd(g.pre_ln[l], g.pre_ln_sd[l]),
                            with_sd(g.post_ln_w2[l], g.post_ln_w2_sd[l]), with_sd(g.pre_ln_w2[l], g.pre_ln_w2_sd[l])});
            csv[l].insert(csv[l].end(), {g.post_ln[l], g.pre_ln[l], g.post_ln_w2[l], g.pre_ln_w2[l], g.post_ln_sd[l], g.pre_ln_sd[l],
                                         g.post_ln_w2_sd[l], g.pre_ln_w2_sd[l]});
        }
        for (const char* k : {"_post_all", "_pre_all", "_post_w2", "_pre_w2", "_post_all_sd", "_pre_all_sd", "_post_w2_sd", "_pre_w2_sd"}) {
            header.push_back(setup + k);
        }
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
    tut.say("hook norms vs the same norms read from .grad: max relative difference " + under(hook_vs_grad, 1e-12));
    gradient_verdict(tut, profiles, L);
    const std::string grad_csv = tut.out_path("10_grad_norms.csv");
    write_csv(grad_csv, header, csv);
    // One panel per set-up (their scales differ by 10 orders of magnitude), the degenerate loss
    // apart on the right; Post-LN solid and Pre-LN dashed, one colour per measured quantity, the
    // seeds' standard deviation as error bars.
    std::string plot = "set datafile separator ','\nset logscale y\nset format y '%.0e'\nset xtics 1,1,12\n"
                       "set xlabel 'block (1 = input side)'\nset grid\nset key top right\n"
                       "set multiplot layout 1,3 title 'gradient norm per block at initialisation, 12 blocks, "
                       "mean and std over 3 seeds'\n";
    const std::vector<std::pair<std::string, std::string>> panels{
        {"ce_default", "cross-entropy, library init"}, {"ce_xavier", "cross-entropy, Xavier init (Xiong et al.)"},
        {"degenerate", "degenerate loss mean(LN(h)^2): noise"}};
    for (std::size_t p = 0; p < panels.size(); ++p) {
        const std::size_t first = 2 + 8 * p;  // columns: post_all, pre_all, post_w2, pre_w2, then their sds
        plot += fmt::format("set title '{}'\nset ylabel '{}'\nplot ", panels[p].second, p == 0 ? "||gradient||" : "");
        const char* names[] = {"Post-LN all", "Pre-LN all", "Post-LN W2", "Pre-LN W2"};
        for (std::size_t k = 0; k < 4; ++k) {
            plot += fmt::format("{}'{}' using 1:{}:{} with yerrorlines lw 2 pt {} dt {} lc rgb '{}' title '{}'", k ? ", " : "", grad_csv,
                                first + k, first + 4 + k, k % 2 ? 6 : 7, k % 2 ? 2 : 1, k < 2 ? "#2471a3" : "#c0392b", names[k]);
        }
        plot += "\n";
    }
    plot += "unset multiplot\n";
    if (gnuplot(plot, tut.out_path("10_grad_norms.png"), 1500, 560, "2020, 2021, 2022")) tut.say("plot: " + tut.out_path("10_grad_norms.png"));

    tut.section("A0.5 / A4.3", "learning rate x depth: Post-LN vs Pre-LN, warm-up and clipping on/off");
    tv::SweepConfig cfg;  // --full: the sweep the guide pastes
    if (!tut.full()) {    // quick: a corner of it
        cfg.lrs = {1e-3, 3e-2};
        cfg.depths = {2, 6};
        cfg.steps = 30;
        cfg.warmup = 10;
        cfg.tail = 5;
    }
    std::string depth_list, seed_list;
    for (std::size_t v : cfg.depths) depth_list += (depth_list.empty() ? "" : ", ") + std::to_string(v);
    for (std::uint64_t v : cfg.seeds) seed_list += (seed_list.empty() ? "" : ", ") + std::to_string(v);
    tut.say(fmt::format("d {}, {} heads, batch {} x {} characters, {} steps of AdamW (betas 0.9/0.95, weight", cfg.d_model,
                        cfg.n_heads, cfg.batch, cfg.context, cfg.steps));
    tut.say(fmt::format("decay 0.01); depths {}; seeds {}; warm-up: linear over {} steps; clipping: max", depth_list,
                        seed_list, cfg.warmup));
    tut.say(fmt::format("gradient norm {}. A run diverged (div) when its loss went NaN/inf, or when its", num(cfg.clip, 1)));
    tut.say(fmt::format("final loss (mean of the last {} steps) is above its loss at step 1. Cells: final", cfg.tail));
    tut.say("loss, mean ± std over the seeds that did not diverge.");
    const std::vector<tv::SweepCell> cells = tv::lr_depth_sweep(corpus, cfg);
    for (bool warmup : {false, true}) {
        for (bool clip : {false, true}) {
            tut.step(fmt::format("warm-up {}, clipping {}", warmup ? "on" : "off", clip ? "on" : "off"));
            std::vector<std::vector<std::string>> rows{{"depth", "LN"}};
            for (double lr : cfg.lrs) rows[0].push_back(lr_label(lr));
            for (std::size_t depth : cfg.depths) {
                for (bool pre : {false, true}) {
                    std::vector<std::string> row{std::to_string(depth), pre ? "Pre" : "Post"};
                    for (const auto& c : cells) {
                        if (c.warmup == warmup && c.clip == clip && c.depth == depth && c.pre_ln == pre) row.push_back(sweep_cell(c));
                    }
                    rows.push_back(row);
                }
            }
            tut.show(table(rows));
        }
    }
    tut.step(fmt::format("diverged runs out of {} per placement (all depths, learning rates and seeds)",
                         cfg.depths.size() * cfg.lrs.size() * cfg.seeds.size()));
    std::vector<std::vector<std::string>> div_rows{{"warm-up", "clipping", "Post-LN", "Pre-LN"}};
    for (bool warmup : {false, true}) {
        for (bool clip : {false, true}) {
            std::size_t post = 0, pre = 0;
            for (const auto& c : cells) {
                if (c.warmup == warmup && c.clip == clip) (c.pre_ln ? pre : post) += c.n_diverged();
            }
            div_rows.push_back({warmup ? "on" : "off", clip ? "on" : "off", std::to_string(post), std::to_string(pre)});
        }
    }
    tut.show(table(div_rows));
    std::vector<std::vector<std::string>> depth_rows{{"depth", "Post-LN", "Pre-LN"}};
    for (std::size_t depth : cfg.depths) {
        std::size_t post = 0, pre = 0;
        for (const auto& c : cells) {
            if (c.depth == depth) (c.pre_ln ? pre : post) += c.n_diverged();
        }
        depth_rows.push_back({std::to_string(depth), std::to_string(post), std::to_string(pre)});
    }
    tut.say(fmt::format("per depth, out of {} (all learning rates, warm-up/clipping settings and seeds):",
                        4 * cfg.lrs.size() * cfg.seeds.size()));
    tut.show(table(depth_rows));
    sweep_verdict(tut, cfg, cells);

    // CSV: one row per cell; the plot: one panel per (clipping, depth), final loss against the
    // learning rate; Post-LN solid, Pre-LN dashed; red without warm-up, green with it.
    std::vector<std::vector<double>> sweep_rows;
    for (const auto& c : cells) {
        sweep_rows.push_back({c.pre_ln ? 1.0 : 0.0, static_cast<double>(c.depth), c.lr, c.warmup ? 1.0 : 0.0, c.clip ? 1.0 : 0.0,
                              c.mean_final(), c.sd_final(), static_cast<double>(c.n_diverged())});
    }
    const std::string sweep_csv = tut.out_path("10_sweep.csv");
    write_csv(sweep_csv, {"pre_ln", "depth", "lr", "warmup", "clip", "final_mean", "final_sd", "diverged"}, sweep_rows);
    // The same y range in every panel, from the data: every plotted mean and its error bar.
    double lowest = INFINITY, highest = -INFINITY;
    for (const auto& c : cells) {
        if (!std::isfinite(c.mean_final())) continue;  // every seed diverged: no point
        const double sd = std::isfinite(c.sd_final()) ? c.sd_final() : 0.0;
        lowest = std::min(lowest, c.mean_final() - sd);
        highest = std::max(highest, c.mean_final() + sd);
    }
    const double margin = std::isfinite(lowest) ? 0.05 * std::max(highest - lowest, 1e-3) : 0.0;
    const std::string yrange = std::isfinite(lowest) ? fmt::format("set yrange [{}:{}]\n", lowest - margin, highest + margin) : "";
    std::string splot = fmt::format("set datafile separator ','\nset logscale x\nset format x '%.0e'\nset grid\n"
                                    "set xlabel 'learning rate'\nset xrange [{}:{}]\n{}"
                                    "set multiplot layout 2,{} title 'final training loss (mean and std over seeds that did "
                                    "not diverge; missing point: all diverged)'\n",
                                    cfg.lrs.front() / 1.5, cfg.lrs.back() * 1.5, yrange, cfg.depths.size());
    for (bool clip : {false, true}) {
        for (std::size_t depth : cfg.depths) {
            // one key, in the top-right panel's empty lower part; the same y range everywhere
            const bool key = !clip && depth == cfg.depths.back();
            splot += fmt::format("set title '{} blocks, clipping {}'\nset ylabel 'loss'\n{}\nplot ", depth, clip ? "on" : "off",
                                 key ? "set key bottom right" : "unset key");
            bool first = true;
            for (bool pre : {false, true}) {
                for (bool warmup : {false, true}) {
                    // gnuplot keeps the rows of this (placement, depth, warm-up, clipping) only
                    splot += fmt::format("{}'{}' using ((${}=={} && $2=={} && ${}=={} && ${}=={}) ? $3 : 1/0):6:7 with yerrorlines lw 2 "
                                         "dt {} lc rgb '{}' title '{}'",
                                         first ? "" : ", ", sweep_csv, 1, pre ? 1 : 0, depth, 4, warmup ? 1 : 0, 5, clip ? 1 : 0,
                                         pre ? 2 : 1, warmup ? "#1e8449" : "#c0392b",
                                         std::string(pre ? "Pre" : "Post") + (warmup ? ", warm-up" : ", no warm-up"));
                    first = false;
                }
            }
            splot += "\n";
        }
    }
    splot += "unset multiplot\n";
    if (gnuplot(splot, tut.out_path("10_sweep.png"), 1600, 800, seed_list)) tut.say("plot: " + tut.out_path("10_sweep.png"));
    tut.say("csv: " + grad_csv + ", " + sweep_csv);
    warmup_curves(tut, cfg, cells, seed_list);
    return 0;
}

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

namespace {

double squared_norm(const Array& a) {
    double s = 0;
    for (double v : a) s += v * v;
    return s;
}

// Mean and sample standard deviation of v[s][l] over s, for each l.
void mean_sd(const std::vector<std::vector<double>>& v, std::vector<double>& mean, std::vector<double>& sd) {
    const std::size_t L = v.front().size();
    mean.assign(L, 0.0);
    sd.assign(L, 0.0);
    for (std::size_t l = 0; l < L; ++l) {
        std::vector<double> over_seeds;
        for (const auto& seed : v) over_seeds.push_back(seed[l]);
        mean[l] = seed_mean(over_seeds);
        sd[l] = seed_std(over_seeds);
    }
}

}  // namespace

GradientProfile gradient_profile(const std::string& setup, const CharCorpus& corpus, std::size_t n_layers, std::size_t d,
                                 std::size_t batches, const std::vector<std::uint64_t>& seeds) {
    GradientProfile g;
    g.setup = setup;
    g.seeds = seeds;
    const bool xavier = setup == "ce_xavier";
    for (bool pre : {false, true}) {
        std::vector<std::vector<double>> all(seeds.size(), std::vector<double>(n_layers, 0.0)), w2 = all;
        for (std::size_t s = 0; s < seeds.size(); ++s) {
            auto model = make_stack(corpus, n_layers, d, pre, xavier, seeds[s]);
            // Gradient hooks on every parameter of every block: each pass, a hook sees dLoss/dp once
            // it is complete and adds its squared norm to its block's sum (W2 also has its own).
            std::vector<double> squares(n_layers, 0.0), squares_w2(n_layers, 0.0);
            std::vector<RemovableHandle> handles;
            for (std::size_t l = 0; l < n_layers; ++l) {
                auto block = model->blocks->at<TransformerBlock>(l);
                for (const Tensor& p : block->parameters()) {
                    handles.push_back(p.register_hook([&squares, l](const Tensor& grad) { squares[l] += squared_norm(grad.value()); }));
                }
                const Tensor& w2_weight = std::dynamic_pointer_cast<nn::Linear>((*block->ffn)[2])->weight;
                handles.push_back(
                    w2_weight.register_hook([&squares_w2, l](const Tensor& grad) { squares_w2[l] += squared_norm(grad.value()); }));
            }
            Generator gen(seeds[s] + 77);
            for (std::size_t b = 0; b < batches; ++b) {
                IndexArray x, y;
                corpus.batch(8, 32, gen, x, y);
                model->zero_grad();
                std::fill(squares.begin(), squares.end(), 0.0);
                std::fill(squares_w2.begin(), squares_w2.end(), 0.0);
                Tensor loss;
                if (setup == "degenerate") {
                    const Tensor h = nn::functional::layer_norm(model->hidden(x), {d});
                    loss = mean(h * h);  // = 1 - eps/(var + eps) per token: almost constant
                } else {
                    loss = model->loss(x, y);
                }
                loss.backward();
                for (std::size_t l = 0; l < n_layers; ++l) {
                    all[s][l] += std::sqrt(squares[l]) / static_cast<double>(batches);
                    w2[s][l] += std::sqrt(squares_w2[l]) / static_cast<double>(batches);
                    // the same norm read from .grad, as before the hooks existed
                    const double from_grad = optim::grad_norm(model->blocks->at<TransformerBlock>(l)->parameters());
                    g.hook_vs_grad = std::max(g.hook_vs_grad, std::fabs(std::sqrt(squares[l]) - from_grad) / from_grad);
                }
            }
            for (auto& h : handles) h.remove();
        }
        mean_sd(all, pre ? g.pre_ln : g.post_ln, pre ? g.pre_ln_sd : g.post_ln_sd);
        mean_sd(w2, pre ? g.pre_ln_w2 : g.post_ln_w2, pre ? g.pre_ln_w2_sd : g.post_ln_w2_sd);
        (pre ? g.pre_ln_w2_per_seed : g.post_ln_w2_per_seed) = w2;
    }
    return g;
}

std::size_t SweepCell::n_diverged() const { return static_cast<std::size_t>(std::count(diverged.begin(), diverged.end(), true)); }

namespace {

// The final losses of the seeds that did not diverge.
std::vector<double> kept_final_losses(const SweepCell& cell) {
    std::vector<double> kept;
    for (std::size_t i = 0; i < cell.final_loss.size(); ++i)
        if (!cell.diverged[i]) kept.push_back(cell.final_loss[i]);
    return kept;
}

}  // namespace

double SweepCell::mean_final() const {
    const std::vector<double> kept = kept_final_losses(*this);
    return kept.empty() ? NAN : seed_mean(kept);
}

double SweepCell::sd_final() const {
    const std::vector<double> kept = kept_final_losses(*this);
    return kept.size() > 1 ? seed_std(kept) : NAN;
}

namespace {

// One training run of the sweep: its loss at step 1, its final loss (mean of the last `tail`
// steps; NaN when the loss went NaN/inf) and whether it diverged.
void sweep_run(CharGPT& model, const CharCorpus& corpus, const SweepConfig& cfg, double lr, bool warmup, bool clip,
               std::uint64_t seed, double& initial, double& final_loss, bool& diverged, std::vector<double>& losses) {
    optim::AdamW opt(model.parameters(), optim::AdamWOptions(lr).betas(0.9, 0.95).weight_decay(0.01));
    optim::LinearWarmup schedule(opt, static_cast<std::int64_t>(warmup ? cfg.warmup : 1));
    Generator gen(seed + 1000);  // the same batches for every setting of a seed
    losses.clear();
    IndexArray x, y;
    initial = NAN;
    for (std::size_t step = 0; step < cfg.steps; ++step) {
        corpus.batch(cfg.batch, cfg.context, gen, x, y);
        opt.zero_grad();
        Tensor loss = model.loss(x, y);
        const double value = loss.item();
        if (step == 0) initial = value;
        if (!std::isfinite(value)) {
            final_loss = NAN;
            diverged = true;
            return;
        }
        losses.push_back(value);
        loss.backward();
        if (clip) {
            try {
                optim::clip_grad_norm(model.parameters(), cfg.clip);
            } catch (const Error&) {  // a NaN/inf gradient
                final_loss = NAN;
                diverged = true;
                return;
            }
        }
        opt.step();
        schedule.step();
    }
    final_loss = tail_mean(losses, cfg.tail);
    diverged = !(final_loss <= initial);
}

}  // namespace

std::vector<SweepCell> lr_depth_sweep(const CharCorpus& corpus, const SweepConfig& cfg) {
    std::vector<SweepCell> cells;
    const std::size_t total = cfg.depths.size() * cfg.lrs.size() * cfg.seeds.size() * 8;
    optim::ProgressBar bar(static_cast<std::int64_t>(total), "lr x depth sweep",
                           cfg.progress ? optim::ProgressBar::Mode::automatic : optim::ProgressBar::Mode::quiet);
    for (bool warmup : {false, true}) {
        for (bool clip : {false, true}) {
            for (std::size_t depth : cfg.depths) {
                for (bool pre : {false, true}) {
                    for (double lr : cfg.lrs) {
                        SweepCell c;
                        c.pre_ln = pre;
                        c.warmup = warmup;
                        c.clip = clip;
                        c.depth = depth;
                        c.lr = lr;
                        for (std::uint64_t seed : cfg.seeds) {
                            GptConfig gc;
                            gc.vocab = corpus.vocab_size();
                            gc.context = cfg.context;
                            gc.d_model = cfg.d_model;
                            gc.n_heads = cfg.n_heads;
                            gc.n_layers = depth;
                            gc.pre_ln = pre;
                            manual_seed(seed);
                            CharGPT model(gc);
                            double initial = NAN, final_loss = NAN;
                            bool diverged = false;
                            std::vector<double> losses;
                            sweep_run(model, corpus, cfg, lr, warmup, clip, seed, initial, final_loss, diverged, losses);
                            c.losses.push_back(losses);
                            c.initial_loss.push_back(initial);
                            c.final_loss.push_back(final_loss);
                            c.diverged.push_back(diverged);
                            bar.update(std::isfinite(final_loss) ? final_loss : 0.0);
                        }
                        cells.push_back(c);
                    }
                }
            }
        }
    }
    bar.finish();
    return cells;
}

void loss_curve(const SweepCell& cell, std::size_t steps, std::vector<double>& mean, std::vector<double>& sd) {
    mean.assign(steps, NAN);
    sd.assign(steps, NAN);
    for (std::size_t t = 0; t < steps; ++t) {
        std::vector<double> at_step;
        for (const auto& run : cell.losses)
            if (t < run.size()) at_step.push_back(run[t]);
        if (!at_step.empty()) mean[t] = seed_mean(at_step);
        if (at_step.size() > 1) sd[t] = seed_std(at_step);
    }
}

}  // namespace tutorial_values
