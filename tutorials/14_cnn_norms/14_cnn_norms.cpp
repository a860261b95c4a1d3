// Tutorial 14: a small CNN on Fashion-MNIST with no normalisation, BatchNorm2d, LayerNorm over
// (C, H, W), GroupNorm and InstanceNorm2d, at batch 128 and batch 4 (A1.6): does "LN worse than
// BN on CNNs" (Ba et al. 2016) show here, and what does each do at a small batch? Quick by
// default (one seed, a slice of the data); --full: 3 seeds on more data, mean ± std.
// Guide: docs/tutorials/14-cnn-norms.md. Run with --step to pause after each step.
#include "tutorials/14_cnn_norms/cnn_norms.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/ops/ops.hpp"
#include "core/engine/random.hpp"
#include "nn/nn.hpp"
#include "optim/adam.hpp"
#include "optim/training/data.hpp"
#include "tutorials/common/seed_stats.hpp"
#include "tutorials/common/tutorial.hpp"

using namespace xg;
using namespace xg::tutorial;
using tutorial_values::mean_pm_std;
using tutorial_values::seed_mean;
using tutorial_values::seed_std;
namespace tv = tutorial_values;

namespace {

using Config = tv::CnnNormsConfig;
using Run = tv::CnnNormsRun;
const std::vector<std::string>& kNorms = tv::a1_6_norms();

// "12.34%" for one seed, "12.34 ± 0.56%" for several.
std::string percent(const std::vector<double>& v) {
    if (v.size() == 1) return num(100 * v[0], 2) + "%";
    return num(100 * seed_mean(v), 2) + " ± " + num(100 * seed_std(v), 2) + "%";
}

}  // namespace

int main(int argc, char** argv) {
    Tutorial tut(argc, argv,
                 {"14 A small CNN with BatchNorm, LayerNorm, GroupNorm, InstanceNorm", "A1.6", "docs/tutorials/14-cnn-norms.md",
                  "about 20 s of CPU (one thread)", "6000 training images, 5000 test images, 3 epochs, 3 seeds (about 23 minutes of CPU; "
                  "on a loaded machine far more: see guide 14)",
                  "14_cnn_norms.csv/.png (test error per epoch, mean ± std over the seeds)"});
    Config c;
    if (tut.full()) {
        c.train_samples = 6000;
        c.test_samples = 5000;
        c.epochs = 3;
        c.seeds = {1, 2, 3};
    }
    optim::TensorDataset train_set = optim::load_fashion_mnist("train");
    optim::TensorDataset test_set = optim::load_fashion_mnist("test");
    if (c.train_samples) train_set = train_set.subset(0, c.train_samples);
    if (c.test_samples) test_set = test_set.subset(0, c.test_samples);

    tut.section("A1.6", "a small CNN on Fashion-MNIST with five normalisations, batch 128 and batch 4");
    tut.say("the paper reports LayerNorm worse than BatchNorm on the convolutional networks of 2016;");
    tut.say("it does not give that experiment. Here: Fashion-MNIST (Debian dataset-fashion-mnist)");
    tut.step(fmt::format("{} mode: {} training images, {} test images, {} epochs, seeds {}", tut.full() ? "full" : "quick",
                         train_set.size(), test_set.size(), c.epochs, fmt::join(c.seeds, ", ")));
    tut.say("Conv(1->8, 3x3, pad 1) -> Norm -> ReLU -> MaxPool 2 -> Conv(8->16) -> Norm -> ReLU ->");
    tut.say("MaxPool 2 -> Flatten -> Linear(784, 10); Adam lr 1e-3; same initial weights per seed");
    tut.say("Norm: none | BN = BatchNorm2d(C): per channel over (N, H, W) |");
    tut.say("LN = LayerNorm((C, H, W)): per sample over all of it | GN = GroupNorm(4, C): per sample");
    tut.say("over groups of C/4 channels | IN = InstanceNorm2d(C, affine): per sample and channel");

    std::vector<std::vector<Run>> runs;  // [batch size x norm][seed]
    for (std::size_t batch : c.batch_sizes) {
        for (const std::string& norm : kNorms) {
            std::vector<Run> seeds;
            for (std::uint64_t seed : c.seeds) seeds.push_back(tv::a1_6_train(norm, batch, seed, c, train_set, test_set));
            runs.push_back(seeds);
        }
    }
    const auto errors = [&](const std::vector<Run>& rs, std::size_t epoch) {
        std::vector<double> v;
        for (const Run& r : rs) v.push_back(r.test_error[epoch]);
        return v;
    };

    for (std::size_t bi = 0; bi < c.batch_sizes.size(); ++bi) {
        tut.step(fmt::format("test error after each epoch, batch {}{}", c.batch_sizes[bi],
                             c.seeds.size() > 1 ? fmt::format(" (mean ± std over {} seeds)", c.seeds.size()) : ""));
        std::vector<std::vector<std::string>> rows{{"epoch"}};
        for (const std::string& norm : kNorms) rows[0].push_back(norm);
        for (std::size_t e = 0; e < c.epochs; ++e) {
            std::vector<std::string> row{std::to_string(e + 1)};
            for (std::size_t ni = 0; ni < kNorms.size(); ++ni) row.push_back(percent(errors(runs[bi * kNorms.size() + ni], e)));
            rows.push_back(row);
        }
        tut.show(table(rows));
    }
    for (const auto& rs : runs) {
        double s = 0;
        for (const Run& r : rs) s += r.seconds;
        fmt::print("  time: {} batch {}: {:.1f} s for {} seed(s)\n", rs[0].norm, rs[0].batch, s, rs.size());
    }
    if (c.seeds.size() > 1) {
        tut.step("final test error per seed");
        std::vector<std::vector<std::string>> rows{{"batch", "seed"}};
        for (const std::string& norm : kNorms) rows[0].push_back(norm);
        for (std::size_t bi = 0; bi < c.batch_sizes.size(); ++bi) {
            for (std::size_t s = 0; s < c.seeds.size(); ++s) {
                std::vector<std::string> row{std::to_string(c.batch_sizes[bi]), std::to_string(c.seeds[s])};
                for (std::size_t ni = 0; ni < kNorms.size(); ++ni) {
                    row.push_back(num(100 * runs[bi * kNorms.size() + ni][s].test_error.back(), 2) + "%");
                }
                rows.push_back(row);
            }
        }
        tut.show(table(rows));
    }

    // The verdict, read from the numbers: LN against BN at batch 128, and each norm's change at batch 4.
    const std::size_t last = c.epochs - 1;
    const auto final_mean = [&](std::size_t bi, const std::string& norm) {
        for (std::size_t ni = 0; ni < kNorms.size(); ++ni) {
            if (kNorms[ni] == norm) return seed_mean(errors(runs[bi * kNorms.size() + ni], last));
        }
        return 0.0;
    };
    tut.step("final test error, batch 128 -> batch 4 (change in points)");
    for (const std::string& norm : kNorms) {
        const double big = final_mean(0, norm), small = final_mean(1, norm);
        tut.say(fmt::format("{:<4} {}% -> {}% ({}{})", norm, num(100 * big, 2), num(100 * small, 2), small >= big ? "+" : "",
                            num(100 * (small - big), 2)));
    }
    // LN against BN at batch 128, seed by seed (the same initial weights per seed): a difference
    // counts only beyond the spread of the per-seed differences. One seed has no spread.
    const auto final_points = [&](const std::string& norm) {
        std::vector<double> points;
        for (std::size_t ni = 0; ni < kNorms.size(); ++ni) {
            if (kNorms[ni] != norm) continue;
            for (double e : errors(runs[ni], last)) points.push_back(100 * e);
        }
        return points;
    };
    const std::vector<double> bn = final_points("BN"), ln = final_points("LN");
    if (c.seeds.size() > 1) {
        const auto ln_bn = tutorial_values::paired_difference(bn, ln);
        tut.conclude("at batch 128, LN against BN in points of test error, seed by seed:");
        tut.say("   " + tutorial_values::describe(ln_bn, "LN", "BN", 2));
        tut.say(std::string("   ") + (!ln_bn.significant ? "LN worse than BN: not shown (within the seed spread)"
                                      : ln_bn.mean > 0    ? "LN worse than BN: holds, beyond the seed spread"
                                                          : "LN worse than BN: does not hold, LN is better beyond the spread"));
    } else {
        tut.conclude(fmt::format("one seed cannot decide LN against BN at batch 128 (LN - BN = {} points here);",
                                 num(ln.front() - bn.front(), 2)));
        tut.say("   --full (seeds 1, 2, 3; run of 2026-12-02, guide 14) found LN - BN = -0.34 ± 0.57 points");
        tut.say("   per seed, t = -1.0: within the spread, LN worse than BN not shown");
    }
    // The small batch, each norm's batch-4 minus batch-128 test error seed by seed: BatchNorm
    // degrading at batch 4 is what the MLP of tutorial 09 shows; here its statistics span H x W too.
    const auto final_of = [&](std::size_t bi, const std::string& norm) {
        std::vector<double> points;
        for (std::size_t ni = 0; ni < kNorms.size(); ++ni) {
            if (kNorms[ni] != norm) continue;
            for (double e : errors(runs[bi * kNorms.size() + ni], last)) points.push_back(100 * e);
        }
        return points;
    };
    if (c.seeds.size() > 1) {
        std::string worse;
        tut.conclude("at batch 4, does a normalisation degrade? batch 4 minus batch 128, points, seed by seed:");
        for (const std::string& norm : kNorms) {
            const auto d = tutorial_values::paired_difference(final_of(0, norm), final_of(1, norm));
            tut.say("   " + tutorial_values::describe(d, norm + " b4", norm + " b128", 2));
            if (d.significant && d.mean > 0) worse += (worse.empty() ? "" : ", ") + norm;
        }
        tut.say("   " + (worse.empty() ? std::string("BN degrading at batch 4: does not hold here, no normalisation ends worse")
                                       : "BN degrading at batch 4: " + std::string(worse.find("BN") != std::string::npos
                                                                                     ? "holds"
                                                                                     : "does not hold") +
                                             "; worse beyond the spread: " + worse));
    } else {
        std::string worse;
        for (const std::string& norm : kNorms)
            if (final_of(1, norm).front() > final_of(0, norm).front()) worse += (worse.empty() ? "" : ", ") + norm;
        tut.conclude(fmt::format("one seed cannot decide whether a normalisation degrades at batch 4 ({} here);",
                                 worse.empty() ? "none ends worse" : worse + " end worse"));
        tut.say("   --full (seeds 1, 2, 3; run of 2026-12-02, guide 14) found none worse, BN included: every");
        tut.say("   normalisation 2.4-2.8 points better at batch 4, none 7.9 (same epochs, 32 times the steps)");
    }

    // The CSV: per run (batch x norm) the mean over the seeds after each epoch, then the sample std.
    const bool spread = c.seeds.size() > 1;
    std::vector<std::string> header{"epoch"};
    std::vector<std::vector<double>> csv;
    for (const auto& rs : runs) header.push_back(fmt::format("{}_b{}", rs[0].norm, rs[0].batch));
    for (const auto& rs : runs) header.push_back(fmt::format("{}_b{}_std", rs[0].norm, rs[0].batch));
    double lowest = 1, highest = 0;  // of mean - std and mean + std: the plot's y range
    for (std::size_t e = 0; e < c.epochs; ++e) {
        std::vector<double> row{static_cast<double>(e + 1)};
        for (const auto& rs : runs) row.push_back(seed_mean(errors(rs, e)));
        for (const auto& rs : runs) row.push_back(spread ? seed_std(errors(rs, e)) : 0.0);
        for (std::size_t i = 0; i < runs.size(); ++i) {
            lowest = std::min(lowest, row[1 + i] - row[1 + runs.size() + i]);
            highest = std::max(highest, row[1 + i] + row[1 + runs.size() + i]);
        }
        csv.push_back(row);
    }
    const std::string csv_path = tut.out_path("14_cnn_norms.csv"), png = tut.out_path("14_cnn_norms.png");
    write_csv(csv_path, header, csv);
    // One panel per batch size, one colour per normalisation, the same y range in both; with several
    // seeds, error bars of ± one std, each norm shifted a little along x so the bars stay apart.
    const std::vector<std::string> colours{"#555555", "#c0392b", "#2471a3", "#229954", "#b9770e"};
    std::string plot = fmt::format("set multiplot layout 1,2 title 'Fashion-MNIST CNN: test error after each epoch ({})'\n",
                                   spread ? fmt::format("mean ± std over {} seeds", c.seeds.size())
                                          : fmt::format("seed {} only", c.seeds.front()));
    plot += fmt::format("set datafile separator ','\nset grid\nset xlabel 'epoch'\nset xtics 1\nset xrange [0.7:{}.3]\n"
                        "set ylabel 'test error (%)'\nset format y '%.0f%%'\nset key top right\n",
                        c.epochs);
    plot += fmt::format("set yrange [{}:{}]\n", std::floor(100 * lowest) - 1, std::ceil(100 * highest) + 1);
    for (std::size_t bi = 0; bi < c.batch_sizes.size(); ++bi) {
        plot += fmt::format("set title 'batch {}'\nplot ", c.batch_sizes[bi]);
        for (std::size_t ni = 0; ni < kNorms.size(); ++ni) {
            const std::size_t column = 2 + bi * kNorms.size() + ni;
            const double shift = 0.03 * (static_cast<double>(ni) - 2.0);
            const std::string style = fmt::format("lw 2 pt 7 lc rgb '{}' title '{}'", colours[ni], kNorms[ni]);
            plot += spread ? fmt::format("{}'{}' using ($1+{}):(100*${}):(100*${}) with yerrorlines {}", ni ? ", " : "",
                                         csv_path, shift, column, column + runs.size(), style)
                           : fmt::format("{}'{}' using 1:(100*${}) with linespoints {}", ni ? ", " : "", csv_path, column, style);
        }
        plot += "\n";
    }
    plot += "unset multiplot\n";
    if (gnuplot(plot, png, 1200, 500, fmt::format("{}", fmt::join(c.seeds, ", ")))) tut.say("plot: " + png);
    tut.say("csv: " + csv_path);

    // For tests/tutorials/test_tutorials_14_cnn_norms.cpp (only when the test asks: ValuesForTests).
    ValuesForTests values;
    values.add("config", {static_cast<double>(train_set.size()), static_cast<double>(test_set.size()),
                          static_cast<double>(c.epochs), c.lr});
    for (const auto& rs : runs) {
        for (const Run& r : rs) {
            const std::string key = fmt::format("{}/b{}/s{}/", r.norm, r.batch, r.seed);
            values.add(key + "test_error", r.test_error);
            values.add(key + "train_loss", r.train_loss);
        }
    }
    values.write();
    return 0;
}

namespace tutorial_values {

using namespace xg;
using xg::tutorial::now_seconds;

namespace {

// The normalisation after a convolution with C channels and an H x W output.
std::shared_ptr<nn::Module> make_norm(const std::string& norm, std::int64_t C, std::int64_t HW) {
    if (norm == "BN") return std::make_shared<nn::BatchNorm2d>(C);  // per channel, over (N, H, W)
    if (norm == "LN") return std::make_shared<nn::LayerNorm>(Shape{static_cast<std::size_t>(C),
                                                                    static_cast<std::size_t>(HW), static_cast<std::size_t>(HW)});
    if (norm == "GN") return std::make_shared<nn::GroupNorm>(4, C);  // per sample, over 4 groups of C/4 channels
    if (norm == "IN") return std::make_shared<nn::InstanceNorm2d>(C, 1e-5, 0.1, true);  // per sample and channel
    return nullptr;
}

// Conv(1->8, 3x3, pad 1) -> Norm -> ReLU -> MaxPool 2 -> Conv(8->16, 3x3, pad 1) -> Norm -> ReLU ->
// MaxPool 2 -> Flatten -> Linear(16*7*7, 10).
std::shared_ptr<nn::Sequential> make_cnn(const std::string& norm) {
    auto net = std::make_shared<nn::Sequential>();
    const auto block = [&](std::int64_t in, std::int64_t out, std::int64_t hw) {
        net->push_back(std::make_shared<nn::Conv2d>(in, out, 3, 1, 1));
        if (auto n = make_norm(norm, out, hw)) net->push_back(n);
        net->push_back(std::make_shared<nn::ReLU>());
        net->push_back(std::make_shared<nn::MaxPool2d>(2));
    };
    block(1, 8, 28);
    block(8, 16, 14);
    net->push_back(std::make_shared<nn::Flatten>());
    net->push_back(std::make_shared<nn::Linear>(16 * 7 * 7, 10));
    return net;
}

Tensor images(const Tensor& flat) { return reshape(flat, {static_cast<long>(flat.value().shape(0)), 1, 28, 28}); }

double test_error(nn::Module& model, const optim::TensorDataset& test) {
    NoGradGuard no_grad;
    model.eval();
    std::size_t wrong = 0;
    for (std::size_t start = 0; start < test.size(); start += 500) {
        const optim::TensorDataset part = test.subset(start, std::min<std::size_t>(500, test.size() - start));
        const Array logits = model.forward(images(Tensor(part.features()))).value();
        for (std::size_t i = 0; i < part.size(); ++i) {
            std::size_t best = 0;
            for (std::size_t c = 1; c < 10; ++c) best = logits(i, c) > logits(i, best) ? c : best;
            wrong += static_cast<std::int64_t>(best) != part.labels()(i);
        }
    }
    model.train();
    return static_cast<double>(wrong) / static_cast<double>(test.size());
}

}  // namespace

const std::vector<std::string>& a1_6_norms() {
    static const std::vector<std::string> norms{"none", "BN", "LN", "GN", "IN"};
    return norms;
}

CnnNormsRun a1_6_train(const std::string& norm, std::size_t batch, std::uint64_t seed, const CnnNormsConfig& c,
                       const optim::TensorDataset& train_set, const optim::TensorDataset& test_set) {
    CnnNormsRun run{norm, batch, seed, {}, {}, 0};
    manual_seed(seed);  // the same convolution and Linear weights for every normalisation
    auto model = make_cnn(norm);
    optim::Adam opt(model->parameters(), optim::AdamOptions(c.lr));
    optim::DataLoader loader(train_set, optim::DataLoaderOptions(batch).shuffle(true).seed(seed));
    const double start = now_seconds();
    for (std::size_t epoch = 0; epoch < c.epochs; ++epoch) {
        double loss_sum = 0;
        std::size_t batches = 0;
        for (const optim::Batch& b : loader) {
            if (norm == "BN" && b.x.size(0) == 1) continue;  // BatchNorm cannot train on a batch of one
            opt.zero_grad();
            Tensor loss = nn::cross_entropy(model->forward(images(b.x)), b.y);
            loss.backward();
            opt.step();
            loss_sum += loss.item();
            ++batches;
        }
        run.train_loss.push_back(loss_sum / static_cast<double>(batches));
        run.test_error.push_back(test_error(*model, test_set));
    }
    run.seconds = now_seconds() - start;
    return run;
}

}  // namespace tutorial_values
