// Tutorial 13: LSTM vs layer-normalised LSTM (A1.5) on a character-level model of the GPL-3 text
// that ships with Debian, with its last 10% held out. Held-out loss against training steps, and
// the steps each needs to reach a target loss, over 3 seeds. Quick by default; --full trains a
// bigger model for longer.
// Guide: docs/tutorials/13-ln-lstm.md. Run with --step to pause after each step.
#include "tutorials/13_ln_lstm/ln_lstm.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/ops/ops.hpp"
#include "core/engine/random.hpp"
#include "nn/nn.hpp"
#include "optim/adam.hpp"
#include "optim/clip.hpp"
#include "tutorials/common/batch_norm_lstm.hpp"
#include "tutorials/common/seed_stats.hpp"
#include "tutorials/common/tutorial.hpp"

using namespace xg::tutorial;
using tutorial_values::mean_pm_std;
using tutorial_values::seed_mean;
using tutorial_values::seed_std;
namespace tv = tutorial_values;

namespace {

const char* const kTextPath = tv::kLnLstmTextPath;
using Config = tv::LnLstmConfig;
using Text = tv::LnLstmText;
using Curve = tv::LnLstmCurve;
using Variant = tv::LnLstmVariant;
const std::vector<Variant>& kVariants = tv::a1_5_variants();

}  // namespace

int main(int argc, char** argv) {
    Tutorial tut(argc, argv,
                 {"13 LSTM vs LayerNorm-LSTM on a character-level language model", "A1.5", "docs/tutorials/13-ln-lstm.md",
                  "about 17 s of CPU (one thread)", "H 128, 600 steps of 16 x 64 characters, 3 seeds "
                  "(about 42 minutes of CPU with 2 threads, 1 h 24 min of wall time on a shared machine: guide 13)",
                  "13_ln_lstm.csv/.png (held-out loss against steps, mean and each seed)"});
    Config c;
    if (tut.full()) {
        c.hidden = 128;
        c.context = 64;
        c.steps = 600;
        c.eval_every = 50;
        c.target = 2.4;
    }
    const Text text = tv::a1_5_load_text(kTextPath);

    tut.section("A1.5", "LSTM vs LN-LSTM (Ba et al. 2016): next-character prediction with a held-out part");
    tut.say("the paper's experiment (question answering on CNN/Daily Mail) is far out of reach here;");
    tut.say("the substitute keeps its question - does LayerNorm make an LSTM learn faster? - on a");
    tut.say("character-level model of the GPL-3 text that ships with Debian");
    tut.step(fmt::format("text {}: {} characters, vocabulary {}", kTextPath, text.train.size() + text.held.size(),
                         text.chars.size()));
    tut.say(fmt::format("training part: the first {} (90%); held out: the last {}, cut into windows of {} + 1",
                        text.train.size(), text.held.size(), c.context));
    tut.step(fmt::format("{} mode: Embedding({}, {}) -> cell(H {}) over {} characters -> Linear({}, {})",
                         tut.full() ? "full" : "quick", text.chars.size(), c.embed, c.hidden, c.context, c.hidden,
                         text.chars.size()));
    tut.say("LSTM: nn::LSTMCell, gates = W_ih x + b_ih + W_hh h + b_hh");
    tut.say("LN-LSTM: nn::LayerNormLSTMCell, gates = LN(W_hh h) + LN(W_ih x), h' = o * tanh(LN(c'))");
    tut.say("BN-LSTM (Cooijmans et al. 2016): gates = BN_t(W_hh h) + BN_t(W_ih x) + b,");
    tut.say("  h' = o * tanh(BN_t(c')); batch statistics of step t in training, running statistics");
    tut.say("  of step t on the held-out part; every BN gain starts at g = 0.1 or g = 1");
    tut.say(fmt::format("training: Adam lr {}, clip 1.0, {} steps of {} random windows, seeds {}", c.lr, c.steps,
                        c.batch, fmt::join(c.seeds, ", ")));

    // runs[v][s]: variant v (kVariants), seed s.
    std::vector<std::vector<Curve>> runs(kVariants.size());
    for (std::uint64_t seed : c.seeds) {
        for (std::size_t v = 0; v < kVariants.size(); ++v) runs[v].push_back(tv::a1_5_train(text, c, kVariants[v], seed));
    }
    const std::vector<Curve>&lstm = runs[0], &ln = runs[1], &bn_small = runs[2], &bn_one = runs[3];

    const std::size_t points = lstm[0].held.size();
    const auto column = [&](const std::vector<Curve>& curves, std::size_t i) {
        std::vector<double> v;
        for (const Curve& r : curves) v.push_back(r.held[i]);
        return v;
    };
    tut.step(fmt::format("held-out loss (nats per character), mean ± std over {} seeds", c.seeds.size()));
    std::vector<std::vector<std::string>> rows{{"step"}};
    for (const Variant& v : kVariants) rows[0].push_back(v.name);
    for (std::size_t i = 0; i < points; ++i) {
        rows.push_back({std::to_string(i * c.eval_every)});
        for (const std::vector<Curve>& curves : runs) rows.back().push_back(mean_pm_std(column(curves, i), 3));
    }
    tut.show(table(rows));
    tut.say(fmt::format("step 0 is ln {} = {} for a uniform guess", text.chars.size(),
                        num(std::log(static_cast<double>(text.chars.size())), 3)));

    // Steps to the target: the first evaluation at or under it (not reached: "-").
    const auto reached = [&](const Curve& r) { return tv::a1_5_steps_to_target(r, c); };
    tut.step(fmt::format("per seed: steps to a held-out loss <= {}; held-out and training losses", num(c.target, 2)));
    std::vector<std::vector<std::string>> per_seed{
        {"seed", "model", "steps to target", "best held-out", "final held-out", "final train"}};
    for (std::size_t s = 0; s < c.seeds.size(); ++s) {
        for (std::size_t v = 0; v < kVariants.size(); ++v) {
            const Curve& r = runs[v][s];
            const double k = reached(r);
            per_seed.push_back({std::to_string(c.seeds[s]), kVariants[v].name, k < 0 ? "-" : num(k, 0),
                                num(*std::min_element(r.held.begin(), r.held.end()), 3), num(r.held.back(), 3),
                                num(r.train_tail, 3)});
        }
    }
    tut.show(table(per_seed));
    for (std::size_t s = 0; s < c.seeds.size(); ++s) {
        fmt::print("  time: seed {}: LSTM {:.1f} s, LN-LSTM {:.1f} s, BN-LSTM g0.1 {:.1f} s, g1 {:.1f} s\n", c.seeds[s],
                   lstm[s].seconds, ln[s].seconds, bn_small[s].seconds, bn_one[s].seconds);
    }

    const auto summary = [&](const std::vector<Curve>& curves) {
        std::vector<double> steps_to, final_loss;
        std::size_t missed = 0;
        for (const Curve& r : curves) {
            const double k = reached(r);
            if (k < 0) ++missed;
            else steps_to.push_back(k);
            final_loss.push_back(r.held.back());
        }
        std::string reach = missed == curves.size() ? "target not reached"
                            : steps_to.size() == 1 ? fmt::format("target at {} steps", num(steps_to[0], 0))
                                                   : fmt::format("target at {} steps", mean_pm_std(steps_to, 0));
        if (missed > 0 && missed < curves.size()) reach += fmt::format(" ({} of {} seeds missed it)", missed, curves.size());
        return fmt::format("{}; final held-out loss {}", reach, mean_pm_std(final_loss, 3));
    };
    tut.step("summary over the seeds");
    for (std::size_t v = 0; v < kVariants.size(); ++v) tut.say(fmt::format("{:<13} {}", kVariants[v].name, summary(runs[v])));
    tut.say("the paper: LN-LSTM converged about twice as fast as BN-LSTM and to a lower validation");
    tut.say("error; BN-LSTM needed its gain initialised to 0.1, LN-LSTM worked with gain 1.");
    // The claims, read from the seeds: steps to the target (a seed that missed it counts as the
    // whole run, so a ratio against such a model is a lower bound), and the final held-out loss
    // compared seed by seed.
    const auto steps_to_target = [&](const std::vector<Curve>& curves) {
        std::vector<double> steps;
        for (const Curve& r : curves) steps.push_back(reached(r) < 0 ? static_cast<double>(c.steps) : reached(r));
        return steps;
    };
    const auto missed_any = [&](const std::vector<Curve>& curves) {
        return std::any_of(curves.begin(), curves.end(), [&](const Curve& r) { return reached(r) < 0; });
    };
    const auto final_held = [](const std::vector<Curve>& curves) {
        std::vector<double> loss;
        for (const Curve& r : curves) loss.push_back(r.held.back());
        return loss;
    };
    // The same, rounded as Step 4 prints them (3 decimals). BN-LSTM at gain 0.1 and 1 end within
    // 0.04 of each other: the spread of such small differences moves with the last digits of the
    // BLAS kernel (0.005 or 0.006), the printed per-seed values do not.
    const auto final_printed = [&](const std::vector<Curve>& curves) {
        std::vector<double> loss = final_held(curves);
        for (double& v : loss) v = std::round(v * 1000) / 1000;
        return loss;
    };
    tut.conclude(fmt::format("faster: the LSTM needs {} times the steps of LN-LSTM to reach {} ({} vs {})",
                             num(seed_mean(steps_to_target(lstm)) / seed_mean(steps_to_target(ln)), 1),
                             num(c.target, 2), mean_pm_std(steps_to_target(lstm), 0),
                             mean_pm_std(steps_to_target(ln), 0)));
    const auto lower = tutorial_values::paired_difference(final_held(lstm), final_held(ln));
    tut.conclude("final held-out loss, seed by seed:");
    tut.say("   " + tutorial_values::describe(lower, "LN-LSTM", "LSTM", 3));
    if (!tut.full()) {
        tut.conclude("but 150 steps stop before the LSTM has converged: the quick run cannot decide \"lower\";");
        tut.say("   --full (600 steps, seeds 1, 2, 3; run of 2026-12-03, guide 13) ends at LN-LSTM");
        tut.say("   1.936 ± 0.008, LSTM 1.939 ± 0.022: not lower");
    }

    // "LN about twice as fast as BN": the evaluations above resolve steps to eval_every only, so
    // here the crossing of the target is interpolated linearly between the two evaluations around
    // it (a seed that never crosses counts as the whole run: then the ratio is a lower bound).
    const auto crossing = [&](const Curve& r) { return tv::a1_5_interpolated_crossing(r, c); };
    const auto crossings = [&](const std::vector<Curve>& curves) {
        std::vector<double> steps;
        for (const Curve& r : curves) steps.push_back(crossing(r));
        return steps;
    };
    const std::vector<double> ln_cross = crossings(ln);
    std::vector<double> ratios;
    tut.conclude(fmt::format("LN twice as fast as BN? steps to {}, interpolated between evaluations:", num(c.target, 2)));
    for (std::size_t v : {2, 3}) {
        const std::vector<Curve>* bn = &runs[v];
        const std::vector<double> bn_cross = crossings(*bn);
        ratios.push_back(seed_mean(bn_cross) / seed_mean(ln_cross));
        tut.say(fmt::format("   {} {} vs LN-LSTM {}: {}{} times", kVariants[v].name, mean_pm_std(bn_cross, 0),
                            mean_pm_std(ln_cross, 0), missed_any(*bn) ? "at least " : "", num(ratios.back(), 1)));
    }
    tut.say("   final held-out loss as printed in Step 4, seed by seed:");
    tut.say("   " + tutorial_values::describe(tutorial_values::paired_difference(final_printed(bn_small), final_printed(ln)),
                                              "LN-LSTM", "BN-LSTM g0.1", 3));
    const double fastest = std::min(ratios[0], ratios[1]);
    const std::string when = tut.full() ? "" : ", to this early target (the quick run stops at 150 steps)";
    tut.say("   " + (fastest >= 1.7  ? "about twice as fast" + when
                     : fastest > 1.0 ? fmt::format("faster, but {} times, not twice{}", num(fastest, 1), when)
                                     : "not faster" + when));
    if (!tut.full()) {
        // After 150 steps LN-LSTM is still ahead of BN-LSTM; the --full run shows the order turn
        // once LN-LSTM overfits (guide 13), so "ends lower" is not the quick run's to decide.
        tut.say("   \"lower\" than BN-LSTM: the quick run cannot decide (150 steps, before LN-LSTM overfits);");
        tut.say("   --full (600 steps, seeds 1, 2, 3; run of 2026-12-03, guide 13) reverses it:");
        tut.say("   LN-LSTM - BN-LSTM g0.1 +0.085 ± 0.017, t = 8.8: BN-LSTM ends lower");
    }
    // "BN needed gain 0.1": gain 1 against gain 0.1, same seeds, same windows.
    const auto gain = tutorial_values::paired_difference(final_printed(bn_small), final_printed(bn_one));
    // The status, by the rule of the last line below: within the spread the run cannot decide,
    // gain 1 ending higher is what the paper reports (holds), gain 1 ending lower refutes the need.
    tut.conclude(fmt::format("{}: BN needed gain 0.1? final held-out loss as printed in Step 4, seed by seed:",
                             !gain.significant ? "cannot decide" : gain.mean > 0 ? "holds" : "not shown"));
    tut.say("   " + tutorial_values::describe(gain, "BN-LSTM g1", "BN-LSTM g0.1", 3));
    tut.say("   " + std::string(!gain.significant ? "within the spread: this run cannot tell that gain 1 hurts BN-LSTM"
                                : gain.mean > 0   ? "gain 1 ends higher than gain 0.1: as the paper reports"
                                                  : fmt::format("gain 1 ends lower: not needed here ({}-step windows, {} steps)",
                                                                c.context, c.steps)));

    std::vector<std::vector<double>> csv;
    const std::vector<std::string> keys{"lstm", "ln_lstm", "bn_lstm_g01", "bn_lstm_g1"};
    std::vector<std::string> header{"step"};
    for (const std::string& k : keys) header.push_back(k + "_mean");
    for (std::uint64_t seed : c.seeds) {
        for (const std::string& k : keys) header.push_back(fmt::format("{}_seed{}", k, seed));
    }
    for (std::size_t i = 0; i < points; ++i) {
        std::vector<double> row{static_cast<double>(i * c.eval_every)};
        for (const std::vector<Curve>& curves : runs) row.push_back(seed_mean(column(curves, i)));
        for (std::size_t s = 0; s < c.seeds.size(); ++s) {
            for (const std::vector<Curve>& curves : runs) row.push_back(curves[s].held[i]);
        }
        csv.push_back(row);
    }
    const std::string csv_path = tut.out_path("13_ln_lstm.csv"), png = tut.out_path("13_ln_lstm.png");
    write_csv(csv_path, header, csv);
    // Thick: the mean over the seeds; thin: each seed. Red LSTM, blue LN-LSTM, green BN-LSTM g0.1,
    // orange BN-LSTM g1; the target dotted.
    const std::vector<std::string> strong{"#c0392b", "#2471a3", "#1e8449", "#d68910"},
        pale{"#f5b7b1", "#a9cce3", "#a9dfbf", "#fad7a0"}, points_type{"7", "5", "9", "11"};
    std::string plot = fmt::format(
        "set title 'char model of GPL-3: held-out loss ({} seeds; thick: mean)'\nset xlabel 'training step'\n"
        "set ylabel 'held-out cross-entropy (nats/char)'\nset grid\nset key top right\nset datafile separator ','\n"
        "plot {} with lines dt 3 lc rgb '#555555' title 'target {}'",
        c.seeds.size(), c.target, num(c.target, 2));
    for (std::size_t v = 0; v < kVariants.size(); ++v) {
        plot += fmt::format(", '{}' using 1:{} with linespoints lw 3 pt {} lc rgb '{}' title '{}'", csv_path, 2 + v,
                            points_type[v], strong[v], kVariants[v].name);
    }
    for (std::size_t s = 0; s < c.seeds.size(); ++s) {
        for (std::size_t v = 0; v < kVariants.size(); ++v) {
            plot += fmt::format(", '{}' using 1:{} with lines lw 1 lc rgb '{}' notitle", csv_path,
                                2 + kVariants.size() * (1 + s) + v, pale[v]);
        }
    }
    if (gnuplot(plot, png, 900, 600, fmt::format("{}", fmt::join(c.seeds, ", ")))) tut.say("plot: " + png);
    tut.say("csv: " + csv_path);

    // For tests/tutorials/test_tutorials_13_ln_lstm.cpp (only when the test asks: ValuesForTests).
    // Keys "seed<s>/variant<v>/...", v indexing kVariants.
    ValuesForTests values;
    values.add("config", {static_cast<double>(c.embed), static_cast<double>(c.hidden), static_cast<double>(c.context),
                          static_cast<double>(c.batch), static_cast<double>(c.steps), static_cast<double>(c.eval_every),
                          c.lr, c.target});
    for (std::size_t s = 0; s < c.seeds.size(); ++s) {
        for (std::size_t v = 0; v < kVariants.size(); ++v) {
            const std::string key = fmt::format("seed{}/variant{}/", c.seeds[s], v);
            values.add(key + "held", runs[v][s].held);
            values.add(key + "train_tail", {runs[v][s].train_tail});
        }
    }
    values.write();
    return 0;
}

namespace tutorial_values {

using namespace xg;
using xg::tutorial::now_seconds;

namespace {

using Text = LnLstmText;
using Config = LnLstmConfig;
using Curve = LnLstmCurve;
using Variant = LnLstmVariant;

}  // namespace

// ---- the text, split into a training part and a held-out part ----------------------------------

LnLstmText a1_5_load_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("13_ln_lstm: cannot read " + path);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string s = ss.str();
    Text t;
    t.chars = s;
    std::sort(t.chars.begin(), t.chars.end());
    t.chars.erase(std::unique(t.chars.begin(), t.chars.end()), t.chars.end());
    std::vector<std::int64_t> ids;
    for (char c : s) ids.push_back(static_cast<std::int64_t>(t.chars.find(c)));
    const std::size_t split = ids.size() * 9 / 10;
    t.train.assign(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(split));
    t.held.assign(ids.begin() + static_cast<std::ptrdiff_t>(split), ids.end());
    return t;
}

namespace {

// Windows of T + 1 characters starting at `starts`: inputs[t] (B) and targets (T*B, time-major).
struct Windows {
    std::vector<IndexArray> inputs;
    IndexArray targets;
};

Windows windows(const std::vector<std::int64_t>& ids, const std::vector<std::size_t>& starts, std::size_t T) {
    const std::size_t B = starts.size();
    Windows w;
    w.targets = IndexArray::from_shape({T * B});
    for (std::size_t t = 0; t < T; ++t) {
        IndexArray x = IndexArray::from_shape({B});
        for (std::size_t b = 0; b < B; ++b) {
            x(b) = ids[starts[b] + t];
            w.targets(t * B + b) = ids[starts[b] + t + 1];
        }
        w.inputs.push_back(x);
    }
    return w;
}

// ---- the models: Embedding -> one recurrent cell unrolled over T -> Linear ----------------------

class CharModel : public nn::Module {
public:
    CharModel(std::size_t vocab, const Config& c, const Variant& v) : kind_(v.cell) {
        embedding = register_module("embedding", std::make_shared<nn::Embedding>(vocab, c.embed));
        if (v.cell == Variant::layer_norm) {
            ln_cell = register_module("cell", std::make_shared<nn::LayerNormLSTMCell>(c.embed, c.hidden));
        } else if (v.cell == Variant::batch_norm) {
            const auto steps = static_cast<std::int64_t>(c.context);
            bn_cell = register_module("cell", std::make_shared<BatchNormLSTMCell>(c.embed, c.hidden, steps, v.gain));
        } else {
            cell = register_module("cell", std::make_shared<nn::LSTMCell>(c.embed, c.hidden));
        }
        head = register_module("head", std::make_shared<nn::Linear>(c.hidden, vocab));
    }
    // Logits (T*B, vocab), time-major, from a zero initial state.
    Tensor forward_windows(const Windows& w) {
        std::optional<nn::LSTMState> state;
        std::vector<Tensor> hs;
        for (std::size_t t = 0; t < w.inputs.size(); ++t) {
            const Tensor e = embedding->forward(w.inputs[t]);
            state = kind_ == Variant::layer_norm   ? ln_cell->forward(e, state)
                    : kind_ == Variant::batch_norm ? bn_cell->forward(e, state, t)  // statistics of step t
                                                   : cell->forward(e, state);
            hs.push_back(state->h);
        }
        return head->forward(cat(hs, 0));
    }
    std::shared_ptr<nn::Embedding> embedding;
    std::shared_ptr<nn::LSTMCell> cell;
    std::shared_ptr<nn::LayerNormLSTMCell> ln_cell;
    std::shared_ptr<BatchNormLSTMCell> bn_cell;
    std::shared_ptr<nn::Linear> head;

private:
    Variant::Cell kind_;
};

// Mean cross-entropy over the whole held-out part, cut into consecutive windows of T + 1
// characters (each starting from a zero state). In evaluation mode: BN-LSTM normalises with its
// running statistics of each time step, not with the held-out batch's.
double held_out_loss(CharModel& model, const Text& text, std::size_t T) {
    NoGradGuard no_grad;
    model.eval();
    struct BackToTraining {
        CharModel& m;
        ~BackToTraining() { m.train(); }
    } back{model};
    std::vector<std::size_t> starts;
    for (std::size_t s = 0; s + T + 1 <= text.held.size(); s += T) starts.push_back(s);
    const Windows w = windows(text.held, starts, T);
    return nn::cross_entropy(model.forward_windows(w), w.targets).item();
}

}  // namespace

const std::vector<LnLstmVariant>& a1_5_variants() {
    static const std::vector<LnLstmVariant> variants{{LnLstmVariant::lstm, 0, "LSTM"},
                                                     {LnLstmVariant::layer_norm, 0, "LN-LSTM"},
                                                     {LnLstmVariant::batch_norm, 0.1, "BN-LSTM g0.1"},
                                                     {LnLstmVariant::batch_norm, 1.0, "BN-LSTM g1"}};
    return variants;
}

LnLstmCurve a1_5_train(const LnLstmText& text, const LnLstmConfig& c, const LnLstmVariant& variant, std::uint64_t seed) {
    manual_seed(seed);
    CharModel model(text.chars.size(), c, variant);
    optim::Adam opt(model.parameters(), optim::AdamOptions(c.lr));
    Generator order(seed + 1000);  // the same windows for every model of a seed
    Curve curve;
    const double start = now_seconds();
    curve.held.push_back(held_out_loss(model, text, c.context));
    double tail = 0;
    for (std::size_t step = 1; step <= c.steps; ++step) {
        std::vector<std::size_t> starts;
        for (std::size_t b = 0; b < c.batch; ++b) starts.push_back(order.randint(text.train.size() - c.context - 1));
        const Windows w = windows(text.train, starts, c.context);
        opt.zero_grad();
        Tensor loss = nn::cross_entropy(model.forward_windows(w), w.targets);
        loss.backward();
        optim::clip_grad_norm(model.parameters(), 1.0);
        opt.step();
        if (step + c.eval_every > c.steps) tail += loss.item() / static_cast<double>(c.eval_every);
        if (step % c.eval_every == 0) curve.held.push_back(held_out_loss(model, text, c.context));
    }
    curve.train_tail = tail;
    curve.seconds = now_seconds() - start;
    return curve;
}

double a1_5_steps_to_target(const LnLstmCurve& r, const LnLstmConfig& c) {
    for (std::size_t i = 0; i < r.held.size(); ++i) {
        if (r.held[i] <= c.target) return static_cast<double>(i * c.eval_every);
    }
    return -1;
}

double a1_5_interpolated_crossing(const LnLstmCurve& r, const LnLstmConfig& c) {
    for (std::size_t i = 1; i < r.held.size(); ++i) {
        if (r.held[i] <= c.target) {
            const double before = r.held[i - 1], after = r.held[i];
            return (static_cast<double>(i - 1) + (before - c.target) / (before - after)) * static_cast<double>(c.eval_every);
        }
    }
    return static_cast<double>(c.steps);
}

}  // namespace tutorial_values
