// Tutorial 17: where a Transformer block normalises, after Post-LN and Pre-LN. The char GPT of
// tutorial 11 with five placements (Post-LN, Pre-LN, Peri-LN, DeepNorm, Pre-LN with LayerNorm
// Scaling) at several depths over 3 seeds: the residual stream, the gradients, the held-out loss
// and the loss without each block (Sun et al. 2025, Kim et al. 2025, Wang et al. 2022). Then Li and
// Arora's equivalence of weight decay and an exponential learning rate, and Brody et al.'s
// decomposition of LayerNorm ablated on the majority task.
// Quick by default (small depths, a tiny model); --full trains deeper models.
// Guide: docs/tutorials/17-norm-placement.md.
#include "tutorials/17_norm_placement/norm_placement.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "core/tools/gradcheck.hpp"
#include "core/ops/ops.hpp"
#include "core/engine/random.hpp"
#include "optim/adam.hpp"
#include "tutorials/common/char_gpt.hpp"
#include "tutorials/common/seed_stats.hpp"
#include "tutorials/common/tutorial.hpp"

using namespace xg::tutorial;
namespace tv = tutorial_values;
using tv::NormPlacement;

namespace {

// Per seed: f(run).
std::vector<double> per_seed(const tv::PlacementCell& c, double (*f)(const tv::PlacementRun&)) {
    std::vector<double> v;
    for (const auto& r : c.runs) v.push_back(f(r));
    return v;
}

double mean_of(const std::vector<double>& v, std::size_t begin, std::size_t end) {
    double s = 0;
    for (std::size_t i = begin; i < end; ++i) s += v[i];
    return s / static_cast<double>(end - begin);
}

// The measures the tables print, per run.
double heldout_of(const tv::PlacementRun& r) { return r.heldout; }
double max_act_init(const tv::PlacementRun& r) { return r.max_activation_init; }
double max_act(const tv::PlacementRun& r) { return r.max_activation; }
double variance_growth(const tv::PlacementRun& r) { return r.variance.back() / r.variance.front(); }
double grad_spread_init(const tv::PlacementRun& r) { return r.grad_init.front() / r.grad_init.back(); }
double grad_spread(const tv::PlacementRun& r) { return r.grad.front() / r.grad.back(); }
// Mean loss increase when one block of the deeper half is removed, and of the earlier half.
double removal_deep(const tv::PlacementRun& r) { return mean_of(r.removal, r.removal.size() / 2, r.removal.size()); }
double removal_early(const tv::PlacementRun& r) { return mean_of(r.removal, 0, r.removal.size() / 2); }

// Mean ± std with 2 significant-looking decimals for ratios that span orders of magnitude.
std::string ratio_pm(const std::vector<double>& v) {
    const double m = tv::seed_mean(v);
    return tv::mean_pm_std(v, std::fabs(m) >= 100 ? 0 : std::fabs(m) >= 10 ? 1 : 2);
}

const tv::PlacementCell& cell_of(const tv::PlacementStudy& s, std::size_t depth, NormPlacement p) {
    for (const auto& c : s.cells)
        if (c.depth == depth && c.placement == p) return c;
    throw std::runtime_error("no such cell");
}

// Per-layer curves at one depth, mean and band (mean ± std over seeds), one panel per measure.
void plot_layers(const Tutorial& tut, const tv::PlacementStudy& s, std::size_t depth, const std::vector<NormPlacement>& ps,
                 const std::vector<std::uint64_t>& seeds) {
    struct Measure {
        const char* key;
        const char* label;
        std::vector<double> tv::PlacementRun::*field;
        bool log;
    };
    const std::vector<Measure> measures{{"var", "variance of the residual stream after block l (trained)",
                                         &tv::PlacementRun::variance, true},
                                        {"grad0", "||grad|| of block l's parameters at init", &tv::PlacementRun::grad_init, true},
                                        {"grad", "||grad|| of block l's parameters after training", &tv::PlacementRun::grad, true},
                                        {"removal", "held-out loss increase without block l", &tv::PlacementRun::removal, false}};
    std::vector<std::string> header{"layer"};
    for (const auto& m : measures)
        for (auto p : ps) {
            std::string name = tv::placement_name(p);
            std::replace(name.begin(), name.end(), '+', '_');
            header.push_back(fmt::format("{}_{}_mean", m.key, name));
            header.push_back(fmt::format("{}_{}_std", m.key, name));
        }
    std::vector<std::vector<double>> rows;
    for (std::size_t l = 0; l < depth; ++l) {
        rows.push_back({static_cast<double>(l + 1)});
        for (const auto& m : measures)
            for (auto p : ps) {
                std::vector<double> v;
                for (const auto& r : cell_of(s, depth, p).runs) v.push_back((r.*(m.field))[l]);
                rows.back().push_back(tv::seed_mean(v));
                rows.back().push_back(tv::seed_std(v));
            }
    }
    const std::string stem = fmt::format("17_norm_placement_depth{}", depth);
    const std::string csv = tut.out_path(stem + ".csv"), png = tut.out_path(stem + ".png");
    write_csv(csv, header, rows);
    const char* colours[] = {"#c0392b", "#2471a3", "#1e8449", "#7d3c98", "#ca6f1e"};
    std::string plot = fmt::format("set datafile separator ','\nset multiplot layout 2,2 title '{} blocks, mean and "
                                   "band of ± 1 std over the seeds'\nset grid\nset key outside right top font ',8'\n"
                                   "set xlabel 'block l'\nset xtics {}\nset format x '%.0f'\nset xrange [1:{}]\n",
                                   depth, std::max<std::size_t>(1, depth / 6), depth);
    for (std::size_t k = 0; k < measures.size(); ++k) {
        plot += fmt::format("set title \"{}\"\n{}\nplot ", measures[k].label,
                            measures[k].log ? "set logscale y\nset format y '%.0e'" : "unset logscale y\nset format y '%g'");
        for (std::size_t i = 0; i < ps.size(); ++i) {
            const std::size_t col = 2 + 2 * (k * ps.size() + i);
            plot += fmt::format("{}'{}' using 1:(${}-${}):(${}+${}) with filledcurves fs transparent solid 0.2 "
                                "noborder lc rgb '{}' notitle, '{}' using 1:{} with linespoints lw 2 pt 7 ps 0.5 lc rgb "
                                "'{}' title '{}'",
                                i ? ", " : "", csv, col, col + 1, col, col + 1, colours[i % 5], csv, col, colours[i % 5],
                                tv::placement_name(ps[i]));
        }
        plot += "\n";
    }
    plot += "unset multiplot\n";
    if (gnuplot(plot, png, 1400, 900, fmt::format("{}", fmt::join(seeds, ", ")))) tut.say("plot: " + png);
    tut.say("csv: " + csv);
}

// "holds" when every part of a claim holds, else which parts do and which do not (a part that
// does not hold was not shown beyond the seed spread, or went the other way).
std::string verdict(const std::vector<std::pair<bool, std::string>>& parts) {
    std::string yes, no;
    for (const auto& [holds, what] : parts) (holds ? yes : no) += (holds ? (yes.empty() ? "" : "; ") : (no.empty() ? "" : "; ")) + what;
    if (no.empty()) return "holds: " + yes;
    if (yes.empty()) return "not shown (within the spread, or the other way): " + no;
    return "partly: " + yes + ". Not shown: " + no;
}

// A conclusion longer than a line: "  => " and the first line, the rest indented under it.
void conclude_wrapped(Tutorial& tut, const std::string& text) {
    const std::string lines = wrap(text, kColumns - 5);
    std::size_t start = 0, end = lines.find('\n');
    tut.conclude(lines.substr(0, end));
    while ((start = end + 1) < lines.size()) {
        end = lines.find('\n', start);
        tut.say("   " + lines.substr(start, end - start));
    }
}

std::string gap_text(double gap) { return gap == 0 ? "0" : sci(gap, 0); }

}  // namespace

namespace {

// The config of both runs. Both train the same small model (d 16, 2 heads, context 16, batches of
// 8): on the shared 2-core machine tutorial 16's width (d 32, context 32, batches of 16) at 24
// blocks would take most of an hour for the 45 models of --full. --full goes deeper and trains longer.
tv::PlacementConfig placement_config(bool full) {
    tv::PlacementConfig cfg;
    cfg.d_model = 16;
    cfg.n_heads = 2;
    cfg.context = 16;
    cfg.batch = 8;
    cfg.heldout_windows = 32;
    if (full) {
        cfg.depths = {6, 12, 24};
        cfg.steps = 300;
        cfg.warmup = 30;
    } else {  // the whole program runs in about 15 s
        cfg.depths = {4, 8};
        cfg.steps = 100;
        cfg.warmup = 10;
    }
    return cfg;
}

// P4.1-P6.1's study: the placements' gradchecks, then per depth the tables and the figure.
tv::PlacementStudy run_placement_study(Tutorial& tut, const tv::PlacementConfig& cfg) {
    std::string seeds;
    for (std::uint64_t s : cfg.seeds) seeds += (seeds.empty() ? "" : ", ") + std::to_string(s);

    tut.section("P4.1 / P5.1 / P6.1", "five placements of the norms in one block");
    for (auto p : cfg.placements) {
        const xg::GradcheckResult g = tv::placement_gradcheck(p);
        tut.say(gradcheck_line(g, 1e-8, 1e-5));
    }
    tut.say("DeepNorm: alpha = (2L)^(1/4) on the residual, beta = (8L)^(-1/4) on the FFN, value and output");
    tut.say("projections' initial weights; Pre-LN+LNS: block l's norms output LN(x) / sqrt(l)");

    tv::PlacementStudy s = tv::placement_study(cfg);
    tut.step(fmt::format("char GPT (d {}, {} heads, context {}), depths {}; the last {} characters held out", cfg.d_model,
                         cfg.n_heads, cfg.context,
                         fmt::format("{}", fmt::join(cfg.depths, ", ")), s.heldout_chars));
    tut.say(fmt::format("{} steps of {} x {}, AdamW lr {}, {} warm-up steps, clip 1.0; seeds {}", cfg.steps, cfg.batch,
                        cfg.context, cfg.lr, cfg.warmup, seeds));
    tut.say(fmt::format("measured on {} held-out windows; mean ± std over the seeds",
                        cfg.heldout_windows ? std::to_string(cfg.heldout_windows) : std::string("all")));
    for (std::size_t depth : cfg.depths) {
        std::vector<std::vector<std::string>> a{{"placement", "held-out loss", "max |h| init", "max |h| trained",
                                                 "var L / var 1"}};
        std::vector<std::vector<std::string>> b{{"placement", "|g1|/|gL| init", "|g1|/|gL| trained", "removal early",
                                                 "removal deep"}};
        for (auto p : cfg.placements) {
            const auto& c = cell_of(s, depth, p);
            a.push_back({tv::placement_name(p), tv::mean_pm_std(per_seed(c, heldout_of)),
                         ratio_pm(per_seed(c, max_act_init)), ratio_pm(per_seed(c, max_act)),
                         ratio_pm(per_seed(c, variance_growth))});
            b.push_back({tv::placement_name(p), ratio_pm(per_seed(c, grad_spread_init)), ratio_pm(per_seed(c, grad_spread)),
                         tv::mean_pm_std(per_seed(c, removal_early)), tv::mean_pm_std(per_seed(c, removal_deep))});
        }
        tut.step(fmt::format("{} blocks: held-out loss, largest activation, growth of the residual variance", depth));
        tut.show(table(a, "    "));
        tut.say("gradient norm of block 1 over block L's; held-out loss increase when one block is removed,");
        tut.say("mean over the earlier half of the blocks and over the deeper half");
        tut.show(table(b, "    "));
        plot_layers(tut, s, depth, cfg.placements, cfg.seeds);
    }
    return s;
}

// P4.1 (Sun et al.) at the deepest depth: Pre-LN's deep blocks, and LayerNorm Scaling.
void conclude_curse_of_depth(Tutorial& tut, const tv::PlacementStudy& s, std::size_t deep) {
    const auto& pre = cell_of(s, deep, NormPlacement::pre);
    const auto& lns = cell_of(s, deep, NormPlacement::pre_lns);
    tut.step(fmt::format("P4.1 at {} blocks: Pre-LN's deep blocks, and LayerNorm Scaling", deep));
    const tv::PairedDifference pre_deep_vs_early =
        tv::paired_difference(per_seed(pre, removal_early), per_seed(pre, removal_deep));
    const tv::PairedDifference lns_var = tv::paired_difference(per_seed(pre, variance_growth), per_seed(lns, variance_growth));
    const tv::PairedDifference lns_deep = tv::paired_difference(per_seed(pre, removal_deep), per_seed(lns, removal_deep));
    const tv::PairedDifference lns_loss = tv::paired_difference(pre.runs.empty() ? std::vector<double>{} : per_seed(pre, heldout_of),
                                                                per_seed(lns, heldout_of));
    tut.say(tv::describe(pre_deep_vs_early, "Pre-LN removal deep", "early"));
    tut.say(tv::describe(lns_var, "LNS var growth", "Pre-LN"));
    tut.say(tv::describe(lns_deep, "LNS removal deep", "Pre-LN"));
    tut.say(tv::describe(lns_loss, "LNS held-out", "Pre-LN"));
    // Sun et al.: Pre-LN's residual variance grows with depth, its deep blocks become nearly the
    // identity (removing one costs little), and LNS undoes both.
    const std::vector<std::pair<bool, std::string>> p41{
        {tv::seed_mean(per_seed(pre, variance_growth)) > 1, "Pre-LN's residual variance grows over the blocks"},
        {pre_deep_vs_early.significant && pre_deep_vs_early.mean < 0, "removing a deep Pre-LN block costs less than an early one"},
        {lns_var.significant && lns_var.mean < 0, "LNS slows the growth"},
        {lns_deep.significant && lns_deep.mean > 0, "LNS's deep blocks matter more than Pre-LN's"}};
    conclude_wrapped(tut, "P4.1 " + verdict(p41));  // three claims share the section: each verdict names its own
}

// P5.1 (Kim et al.) at the deepest depth: Peri-LN against Pre-LN and Post-LN.
void conclude_peri_ln(Tutorial& tut, const tv::PlacementStudy& s, std::size_t deep) {
    const auto& pre = cell_of(s, deep, NormPlacement::pre);
    const auto& peri = cell_of(s, deep, NormPlacement::peri);
    const auto& post = cell_of(s, deep, NormPlacement::post);
    tut.step(fmt::format("P5.1 at {} blocks: Peri-LN against Pre-LN and Post-LN", deep));
    const tv::PairedDifference peri_act = tv::paired_difference(per_seed(pre, max_act), per_seed(peri, max_act));
    const tv::PairedDifference peri_loss_pre = tv::paired_difference(per_seed(pre, heldout_of), per_seed(peri, heldout_of));
    const tv::PairedDifference peri_loss_post = tv::paired_difference(per_seed(post, heldout_of), per_seed(peri, heldout_of));
    tut.say(tv::describe(peri_act, "Peri-LN max |h|", "Pre-LN", 2));
    tut.say(tv::describe(peri_loss_pre, "Peri-LN held-out", "Pre-LN"));
    tut.say(tv::describe(peri_loss_post, "Peri-LN held-out", "Post-LN"));
    // Kim et al.: steadier (smaller) activations than Pre-LN, and a better loss than both.
    const std::vector<std::pair<bool, std::string>> p51{
        {peri_act.significant && peri_act.mean < 0, "Peri-LN's largest activation is smaller than Pre-LN's"},
        {peri_loss_pre.significant && peri_loss_pre.mean < 0, "its held-out loss is lower than Pre-LN's"},
        {peri_loss_post.significant && peri_loss_post.mean < 0, "its held-out loss is lower than Post-LN's"}};
    conclude_wrapped(tut, "P5.1 " + verdict(p51));  // three claims share the section: each verdict names its own
}

// P6.1 (Wang et al.) at the deepest depth: DeepNorm against Post-LN.
void conclude_deepnorm(Tutorial& tut, const tv::PlacementStudy& s, std::size_t deep, std::size_t seeds) {
    const auto& post = cell_of(s, deep, NormPlacement::post);
    const auto& dn = cell_of(s, deep, NormPlacement::deepnorm);
    tut.step(fmt::format("P6.1 at {} blocks: DeepNorm against Post-LN", deep));
    const tv::PairedDifference dn_loss = tv::paired_difference(per_seed(post, heldout_of), per_seed(dn, heldout_of));
    const tv::PairedDifference dn_grad = tv::paired_difference(per_seed(post, grad_spread_init), per_seed(dn, grad_spread_init));
    tut.say(tv::describe(dn_grad, "DeepNorm |g1|/|gL| init", "Post-LN", 2));
    tut.say(tv::describe(dn_loss, "DeepNorm held-out", "Post-LN"));
    std::size_t post_div = 0, dn_div = 0;
    for (const auto& r : post.runs) post_div += r.diverged;
    for (const auto& r : dn.runs) dn_div += r.diverged;
    tut.say(fmt::format("diverged runs: Post-LN {}, DeepNorm {} of {}", post_div, dn_div, seeds));
    // Wang et al.: DeepNorm keeps the deep Post-LN stack trainable and better than plain Post-LN.
    const std::vector<std::pair<bool, std::string>> p61{
        {dn_div <= post_div, "DeepNorm diverges no more often than Post-LN"},
        {dn_loss.significant && dn_loss.mean < 0, "its held-out loss is lower than Post-LN's"}};
    conclude_wrapped(tut, "P6.1 " + verdict(p61));  // three claims share the section: each verdict names its own

}

// P7.1 (Li and Arora 2020): weight decay on a scale-invariant loss as a growing learning rate.
void show_scale_invariance(Tutorial& tut) {
    tut.section("P7.1", "weight decay on a scale-invariant loss = a growing learning rate (Li and Arora 2020)");
    const tv::ScaleInvarianceConfig li;
    tut.step(fmt::format("LN(X W^T) V, W ({}, {}) trained, V fixed; {} samples, {} classes, full-batch GD", li.d_hidden,
                         li.d_in, li.samples, li.classes));
    tut.say(fmt::format("run A: lr {:g}, weight decay {:g}; run B: no weight decay, lr_t = {:g} (1 - {:g})^(-2t-1)", li.lr,
                        li.weight_decay, li.lr, li.lr * li.weight_decay));
    tv::Equivalence exact;
    for (double eps : {0.0, 1e-5}) {
        const tv::Equivalence e = tv::li_arora(li, eps);
        if (eps == 0) exact = e;
        std::vector<std::vector<std::string>> rows{{"step", "loss A", "loss B", "||W|| A", "||W|| B", "lr_t B", "direction gap"}};
        for (const auto& r : e.rows) {
            rows.push_back({std::to_string(r.step), num(r.loss_wd, 6), num(r.loss_schedule, 6), num(r.norm_wd, 4),
                            num(r.norm_schedule, 4), num(r.lr_schedule, 4),
                            eps == 0 ? under(r.direction_gap, 1e-14) : gap_text(r.direction_gap)});
        }
        tut.step(fmt::format("LayerNorm eps = {}", eps == 0 ? std::string("0 (exactly scale invariant)") : sci(eps, 0)));
        tut.show(table(rows, "    "));
        tut.say(eps == 0 ? fmt::format("over all {} steps: direction gap {}, loss gap {}", li.steps,
                                       under(e.max_direction_gap, 1e-14), under(e.max_loss_gap, 1e-14))
                         : fmt::format("over all {} steps: direction gap {}, loss gap {}", li.steps,
                                       gap_text(e.max_direction_gap), gap_text(e.max_loss_gap)));
    }
    tut.say("||W|| B = ||W|| A (1 - lr wd)^(-t): the same directions at another scale; with eps > 0 the");
    tut.say("loss is not exactly scale invariant, and run A's shrinking W feels eps more than run B's");
    tut.conclude(exact.max_direction_gap < 1e-14 && exact.max_loss_gap < 1e-14
                     ? "holds: with eps = 0 the runs agree to rounding; eps = 1e-5 parts them slightly"
                     : "does not hold: the runs part beyond rounding even with eps = 0");

}

// P8.1 (Brody et al. 2023): LayerNorm's projection and scaling, on the majority task.
void show_geometry(Tutorial& tut) {
    tut.section("P8.1", "LayerNorm = projection orthogonal to (1, ..., 1) + scaling to sqrt(d) (Brody et al. 2023)");
    const tv::MajorityConfig mc;
    tut.step(fmt::format("majority task: {} tokens from a vocabulary of {}, predict the most frequent one", mc.length, mc.vocab));
    tut.say(fmt::format("embedding (d {}) -> norm -> one attention head -> last position -> Linear; {} Adam steps of {},",
                        mc.d_model, mc.steps, mc.batch));
    tut.say(fmt::format("lr {:g}; accuracy on {} fresh sequences. A key is unselectable when no query ranks it", mc.lr,
                        mc.test_sequences));
    tut.say(fmt::format("first: tried are {} random directions and the ones pointing at each key", mc.queries));
    const auto variants = tv::majority_ablation(mc);
    std::vector<std::vector<std::string>> rows{{"norm", "accuracy", fmt::format("unselectable keys (of {})", mc.vocab)}};
    for (const auto& v : variants) {
        rows.push_back({tv::majority_norm_name(v.norm), tv::mean_pm_std(v.accuracy), tv::mean_pm_std(v.unselectable, 2)});
    }
    tut.show(table(rows, "    "));
    const auto& full_ln = variants[0];
    const auto& proj = variants[1];
    const auto& scal = variants[2];
    const auto& none = variants[3];
    const tv::PairedDifference acc_proj = tv::paired_difference(none.accuracy, proj.accuracy);
    const tv::PairedDifference keys_scal = tv::paired_difference(none.unselectable, scal.unselectable);
    tut.say(tv::describe(acc_proj, "projection accuracy", "none"));
    tut.say(tv::describe(keys_scal, "scaling unselectable", "none", 2));
    // Brody et al.: the scaling makes every key selectable, the projection helps attention
    // average (the majority task).
    const std::vector<std::pair<bool, std::string>> p81{
        {tv::seed_mean(scal.unselectable) == 0 && tv::seed_mean(full_ln.unselectable) == 0,
         "with the scaling every key is selectable"},
        {acc_proj.significant && acc_proj.mean > 0, "the projection alone lifts the accuracy over no norm"}};
    conclude_wrapped(tut, verdict(p81));
}

}  // namespace

int main(int argc, char** argv) {
    Tutorial tut(argc, argv,
                 {"17 Norm placement: Curse of Depth, Peri-LN, DeepNorm, scale invariance, geometry",
                  "P4.1, P5.1, P6.1, P7.1, P8.1", "docs/tutorials/17-norm-placement.md", "about 12 s of CPU (one thread)",
                  "depths 6, 12 and 24, 300 steps per model (about 2 minutes of CPU)",
                  "17_norm_placement_depth<L>.csv/.png (per block: residual variance, gradient norms at init and "
                  "after training, loss without the block; mean and band over the seeds)"});
    keep_heap_mapped();
    const tv::PlacementConfig cfg = placement_config(tut.full());
    const tv::PlacementStudy s = run_placement_study(tut, cfg);
    const std::size_t deep = cfg.depths.back();
    conclude_curse_of_depth(tut, s, deep);
    conclude_peri_ln(tut, s, deep);
    conclude_deepnorm(tut, s, deep, cfg.seeds.size());
    show_scale_invariance(tut);
    show_geometry(tut);
    return 0;
}

namespace tutorial_values {

using namespace xg;

// ---- P4.1, P5.1, P6.1 --------------------------------------------------------------------------

GradcheckResult placement_gradcheck(NormPlacement placement) {
    manual_seed(17);
    auto block = std::make_shared<TransformerBlock>(4, 2, placement, 2, 3);
    const std::vector<Tensor> in{randn({1, 3, 4}, true)};
    GradcheckOptions opt;
    opt.name = placement_name(placement) + " block (d 4, 2 heads)";
    return gradcheck([&](const std::vector<Tensor>& v) { return block->forward(v[0]); }, in, opt);
}

namespace {

// The first `n` held-out windows (0: all).
void heldout_windows(const CharCorpus& corpus, std::size_t T, std::size_t n, IndexArray& x, IndexArray& y) {
    corpus.heldout_batch(T, x, y);
    if (n == 0 || n >= x.shape()[0]) return;
    IndexArray xs = IndexArray::from_shape({n, T}), ys = IndexArray::from_shape({n * T});
    for (std::size_t b = 0; b < n; ++b) {
        for (std::size_t t = 0; t < T; ++t) {
            xs(b, t) = x(b, t);
            ys(b * T + t) = y(b * T + t);
        }
    }
    x = xs;
    y = ys;
}

// Variance of every block's output and the largest |h| over all of them, on the windows x.
void residual_stream(CharGPT& m, const IndexArray& x, std::vector<double>& variance, double& max_abs) {
    NoGradGuard no_grad;
    variance.assign(m.blocks->size(), 0.0);
    max_abs = 0;
    m.after_block = [&](std::size_t i, const Tensor& h) {
        const Array& v = h.value();
        double mean = 0, sq = 0;
        for (double e : v) {
            mean += e;
            max_abs = std::max(max_abs, std::fabs(e));
        }
        mean /= static_cast<double>(v.size());
        for (double e : v) sq += (e - mean) * (e - mean);
        variance[i] = sq / static_cast<double>(v.size());
    };
    m.logits(x);
    m.after_block = nullptr;
}

// Norm of the loss gradient w.r.t. each block's parameters, on one training batch.
std::vector<double> block_gradients(CharGPT& m, const IndexArray& x, const IndexArray& y) {
    m.zero_grad();
    m.loss(x, y).backward();
    std::vector<double> norms;
    for (std::size_t i = 0; i < m.blocks->size(); ++i) {
        double sq = 0;
        for (const Tensor& p : (*m.blocks)[i]->parameters()) {
            if (!p.has_grad()) continue;
            for (double g : p.grad_value()) sq += g * g;
        }
        norms.push_back(std::sqrt(sq));
    }
    m.zero_grad();
    return norms;
}

double loss_on(CharGPT& m, const IndexArray& x, const IndexArray& y) {
    NoGradGuard no_grad;
    return m.loss(x, y).item();
}

}  // namespace

PlacementStudy placement_study(const PlacementConfig& cfg) {
    if (cfg.seeds.size() < 2) fail("placement_study", "needs at least 2 seeds");
    const CharCorpus corpus(cfg.text_path, cfg.heldout_fraction);
    PlacementStudy s;
    s.vocab = corpus.vocab_size();
    s.heldout_chars = corpus.heldout_size();
    IndexArray hx, hy;
    heldout_windows(corpus, cfg.context, cfg.heldout_windows, hx, hy);
    for (std::size_t depth : cfg.depths) {
        for (NormPlacement p : cfg.placements) {
            PlacementCell cell;
            cell.placement = p;
            cell.depth = depth;
            for (std::uint64_t seed : cfg.seeds) {
                GptConfig c;
                c.vocab = corpus.vocab_size();
                c.context = cfg.context;
                c.d_model = cfg.d_model;
                c.n_layers = depth;
                c.n_heads = cfg.n_heads;
                c.pre_ln = true;  // the placement decides (pre_ln = false would force Post-LN)
                c.placement = p;
                manual_seed(seed);  // per seed the same initial weights for every placement (DeepNorm rescales some)
                CharGPT model(c);
                IndexArray gx, gy;  // the batch the gradient norms are measured on
                Generator probe(seed + 1000);
                corpus.batch(cfg.batch, cfg.context, probe, gx, gy);
                PlacementRun r;
                r.grad_init = block_gradients(model, gx, gy);
                residual_stream(model, hx, r.variance_init, r.max_activation_init);
                TrainOptions o;
                o.steps = cfg.steps;
                o.batch = cfg.batch;
                o.lr = cfg.lr;
                o.warmup = cfg.warmup;
                o.seed = seed;
                o.name = fmt::format("{}, {} blocks, seed {}", placement_name(p), depth, seed);
                o.progress = cfg.progress;
                const TrainCurve curve = train_char_model(model, corpus, o);
                r.diverged = curve.diverged;
                r.heldout = curve.diverged ? NAN : heldout_loss(model, corpus);
                r.grad = block_gradients(model, gx, gy);
                residual_stream(model, hx, r.variance, r.max_activation);
                const double base = loss_on(model, hx, hy);
                for (std::size_t i = 0; i < depth; ++i) {
                    model.skipped_block = i;
                    r.removal.push_back(loss_on(model, hx, hy) - base);
                }
                model.skipped_block.reset();
                cell.runs.push_back(r);
            }
            s.cells.push_back(cell);
        }
    }
    return s;
}

// ---- P7.1 ---------------------------------------------------------------------------------------

Equivalence li_arora(const ScaleInvarianceConfig& c, double norm_eps) {
    Generator gen(c.seed);
    Tensor X = randn({c.samples, c.d_in}, gen);
    const Array teacher = randn({c.d_in, c.classes}, gen).value();
    const Tensor V = randn({c.d_hidden, c.classes}, gen);
    const Array W0 = randn({c.d_hidden, c.d_in}, gen).value();
    IndexArray labels = IndexArray::from_shape({c.samples});
    for (std::size_t i = 0; i < c.samples; ++i) {  // the teacher's argmax
        std::size_t best = 0;
        std::vector<double> score(c.classes, 0.0);
        for (std::size_t k = 0; k < c.classes; ++k)
            for (std::size_t j = 0; j < c.d_in; ++j) score[k] += X.value()(i, j) * teacher(j, k);
        for (std::size_t k = 1; k < c.classes; ++k)
            if (score[k] > score[best]) best = k;
        labels(i) = static_cast<std::int64_t>(best);
    }
    // The loss and its gradient at W.
    auto loss_and_grad = [&](const Array& w, Array& grad) {
        Tensor W(w, true);
        const Tensor h = nn::functional::layer_norm(matmul(X, transpose(W, 0, 1)), {c.d_hidden}, Tensor(), Tensor(), norm_eps);
        Tensor loss = nn::cross_entropy(matmul(h, V), labels);
        loss.backward();
        grad = W.grad().value();
        return loss.item();
    };
    auto norm = [](const Array& a) {
        double s = 0;
        for (double v : a) s += v * v;
        return std::sqrt(s);
    };
    Equivalence e;
    e.norm_eps = norm_eps;
    Array wa = W0, wb = W0, ga, gb;
    const double shrink = 1.0 - c.lr * c.weight_decay;
    const std::set<std::size_t> shown{0, c.steps / 8, c.steps / 4, c.steps / 2, c.steps};
    for (std::size_t t = 0; t <= c.steps; ++t) {
        const double la = loss_and_grad(wa, ga), lb = loss_and_grad(wb, gb);
        const double lr_t = c.lr * std::pow(shrink, -2.0 * static_cast<double>(t) - 1.0);
        const double na = norm(wa), nb = norm(wb);
        double gap = 0;
        for (std::size_t i = 0; i < wa.size(); ++i) gap = std::max(gap, std::fabs(wa.data()[i] / na - wb.data()[i] / nb));
        e.max_direction_gap = std::max(e.max_direction_gap, gap);
        e.max_loss_gap = std::max(e.max_loss_gap, std::fabs(la - lb));
        if (shown.count(t)) e.rows.push_back({t, la, lb, na, nb, lr_t, gap});
        if (t == c.steps) break;
        wa = Array(shrink * wa - c.lr * ga);  // w <- w - lr (g + wd w)
        wb = Array(wb - lr_t * gb);
    }
    return e;
}

// ---- P8.1 ---------------------------------------------------------------------------------------

std::string majority_norm_name(MajorityNorm norm) {
    switch (norm) {
        case MajorityNorm::layer_norm: return "LayerNorm";
        case MajorityNorm::projection: return "projection only";
        case MajorityNorm::scaling: return "scaling only";
        case MajorityNorm::none: return "none";
    }
    fail("majority_norm_name", "unknown MajorityNorm");
}

std::size_t count_unselectable(const Array& keys, std::size_t queries, std::uint64_t seed) {
    const std::size_t n = keys.shape()[0], d = keys.shape()[1];
    Generator gen(seed);
    std::vector<bool> selected(n, false);
    std::vector<double> centroid(d, 0.0), q(d);
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < d; ++j) centroid[j] += keys(i, j) / static_cast<double>(n);
    auto select_top = [&]() {
        std::size_t best = 0;
        double top = -INFINITY;
        for (std::size_t i = 0; i < n; ++i) {
            double s = 0;
            for (std::size_t j = 0; j < d; ++j) s += q[j] * keys(i, j);
            if (s > top) {
                top = s;
                best = i;
            }
        }
        selected[best] = true;
    };
    // The queries pointing at each key, from the origin and from the centroid: on a sphere about
    // the origin the first one always ranks its key first.
    for (std::size_t i = 0; i < n; ++i) {
        for (std::size_t j = 0; j < d; ++j) q[j] = keys(i, j);
        select_top();
        for (std::size_t j = 0; j < d; ++j) q[j] = keys(i, j) - centroid[j];
        select_top();
    }
    for (std::size_t k = 0; k < queries; ++k) {
        for (double& v : q) v = gen.normal();
        select_top();
    }
    return static_cast<std::size_t>(std::count(selected.begin(), selected.end(), false));
}

namespace {

// Sequences of `length` tokens with a unique most frequent token, and that token.
void majority_batch(const MajorityConfig& c, std::size_t B, Generator& gen, IndexArray& x, IndexArray& y) {
    x = IndexArray::from_shape({B, c.length});
    y = IndexArray::from_shape({B});
    std::vector<std::size_t> count(c.vocab);
    for (std::size_t b = 0; b < B; ++b) {
        for (;;) {
            std::fill(count.begin(), count.end(), 0);
            for (std::size_t t = 0; t < c.length; ++t) {
                x(b, t) = static_cast<std::int64_t>(gen.randint(c.vocab));
                ++count[static_cast<std::size_t>(x(b, t))];
            }
            const auto top = std::max_element(count.begin(), count.end());
            if (std::count(count.begin(), count.end(), *top) == 1) {
                y(b) = top - count.begin();
                break;
            }
        }
    }
}

struct MajorityModel {
    std::shared_ptr<nn::Embedding> emb;
    std::shared_ptr<nn::Module> norm;
    std::shared_ptr<nn::MultiheadAttention> attn;
    std::shared_ptr<nn::Linear> head;

    std::vector<Tensor> parameters() const {
        std::vector<Tensor> all;
        for (const auto& m : std::vector<std::shared_ptr<nn::Module>>{emb, norm, attn, head})
            for (const Tensor& p : m->parameters()) all.push_back(p);
        return all;
    }
    Tensor logits(const IndexArray& x) const {
        const Tensor h = norm->forward(emb->forward(x));
        const auto T = static_cast<std::int64_t>(x.shape()[1]);
        const Tensor a = attn->forward(h, h, h);
        return head->forward(reshape(narrow(a, 1, T - 1, 1), {static_cast<long>(x.shape()[0]), -1}));
    }
};

std::shared_ptr<nn::Module> make_majority_norm(MajorityNorm kind, std::size_t d) {
    switch (kind) {
        case MajorityNorm::layer_norm: return std::make_shared<nn::LayerNorm>(static_cast<std::int64_t>(d), 1e-5, false);
        case MajorityNorm::projection: return std::make_shared<MeanProjection>();
        case MajorityNorm::scaling: return std::make_shared<SphereScaling>();
        case MajorityNorm::none: return std::make_shared<NoNorm>();
    }
    fail("make_majority_norm", "unknown MajorityNorm");
}

}  // namespace

std::vector<MajorityVariant> majority_ablation(const MajorityConfig& c) {
    if (c.seeds.size() < 2) fail("majority_ablation", "needs at least 2 seeds");
    std::vector<MajorityVariant> out;
    for (MajorityNorm kind : {MajorityNorm::layer_norm, MajorityNorm::projection, MajorityNorm::scaling, MajorityNorm::none}) {
        MajorityVariant v;
        v.norm = kind;
        for (std::uint64_t seed : c.seeds) {
            manual_seed(seed);  // the same initial weights for every norm (none has parameters)
            const auto d = static_cast<std::int64_t>(c.d_model);
            MajorityModel m{std::make_shared<nn::Embedding>(static_cast<std::int64_t>(c.vocab), d),
                            make_majority_norm(kind, c.d_model), std::make_shared<nn::MultiheadAttention>(d, 1),
                            std::make_shared<nn::Linear>(d, static_cast<std::int64_t>(c.vocab))};
            optim::Adam opt(m.parameters(), optim::AdamOptions(c.lr));
            Generator gen(seed);
            IndexArray x, y;
            for (std::size_t step = 0; step < c.steps; ++step) {
                majority_batch(c, c.batch, gen, x, y);
                opt.zero_grad();
                nn::cross_entropy(m.logits(x), y).backward();
                opt.step();
            }
            NoGradGuard no_grad;
            Generator test(seed + 1000);
            majority_batch(c, c.test_sequences, test, x, y);
            const Array logit = m.logits(x).value();
            std::size_t right = 0;
            for (std::size_t b = 0; b < c.test_sequences; ++b) {
                std::size_t best = 0;
                for (std::size_t k = 1; k < c.vocab; ++k)
                    if (logit(b, k) > logit(b, best)) best = k;
                right += static_cast<std::int64_t>(best) == y(b);
            }
            v.accuracy.push_back(static_cast<double>(right) / static_cast<double>(c.test_sequences));
            // Every token's key is W_k s + b_k with s = norm(embedding). q.(W_k s + b_k) =
            // (W_k^T q).s + q.b_k: with W_k (d, d) invertible, W_k^T q reaches every direction and
            // q.b_k shifts every score alike, so a key can be ranked first exactly when its s can.
            IndexArray all = IndexArray::from_shape({c.vocab});
            for (std::size_t k = 0; k < c.vocab; ++k) all(k) = static_cast<std::int64_t>(k);
            const Array normed = m.norm->forward(m.emb->forward(all)).value();
            v.unselectable.push_back(static_cast<double>(count_unselectable(normed, c.queries, seed + 2000)));
        }
        out.push_back(v);
    }
    return out;
}

}  // namespace tutorial_values
