// Tutorial 09: the paper's small-batch experiment (A1.3) - BatchNorm vs LayerNorm MLPs at batch
// size 128 and 4 - on Fashion-MNIST. Quick by default; --full trains on all 60000 images.
// Guide: docs/tutorials/09-small-batch-fashion-mnist.md.
#include "tutorials/09_small_batch_fashion_mnist/small_batch.hpp"

#include <fmt/format.h>

#include "core/ops.hpp"
#include "core/random.hpp"
#include "optim/adam.hpp"
#include "optim/training/data.hpp"
#include "optim/training/progress.hpp"
#include "tutorials/common/tutorial.hpp"

#ifndef XGRAD_TUTORIAL_NO_MAIN  // the tests link the steps below without this main()

using namespace xg::tutorial;
namespace tv = tutorial_values;

int main(int argc, char** argv) {
    Tutorial tut(argc, argv,
                 {"09 Small batches: BatchNorm vs LayerNorm on Fashion-MNIST", "A1.3",
                  "docs/tutorials/09-small-batch-fashion-mnist.md", "about 10 s of CPU (one thread)",
                  "all 60000 training images, H = 256, 10 epochs (about 6 minutes)",
                  "09_small_batch.csv/.png (test error per epoch)"});
    tv::SmallBatchConfig cfg;  // quick: 12000 training images, the whole test set, 3 epochs
    cfg.train_samples = 12000;
    cfg.test_samples = 0;
    cfg.epochs = 3;
    if (tut.full()) {  // all 60000 images, 10 epochs
        cfg.train_samples = 0;
        cfg.hidden = 256;
        cfg.epochs = 10;
    }
    tut.section("A1.3", "MLP 784-H-H-10 (Linear, Norm, ReLU), Adam lr 1e-3, batch 128 and batch 4");
    tut.say("the paper used permutation-invariant MNIST; MNIST is not installed here, so this uses");
    tut.say("Fashion-MNIST (Debian dataset-fashion-mnist, /usr/share/datasets/fashion-mnist):");
    tut.say("the same format, a harder task");
    tut.step(fmt::format("{} mode: {} training images, {} test images, H = {}, {} epochs", tut.full() ? "full" : "quick",
                         cfg.train_samples ? std::to_string(cfg.train_samples) : "60000",
                         cfg.test_samples ? std::to_string(cfg.test_samples) : "10000", cfg.hidden, cfg.epochs));

    const std::vector<tv::SmallBatchRun> runs = tv::a1_3_small_batch(cfg);
    std::vector<std::vector<std::string>> rows{{"epoch"}};
    std::vector<std::string> header{"epoch"};
    for (const auto& r : runs) {
        rows[0].push_back(fmt::format("{} batch {}", r.norm, r.batch_size));
        header.push_back(fmt::format("{}_b{}", r.norm, r.batch_size));
    }
    std::vector<std::vector<double>> csv;
    for (std::size_t e = 0; e < cfg.epochs; ++e) {
        std::vector<std::string> row{std::to_string(e + 1)};
        std::vector<double> values{static_cast<double>(e + 1)};
        for (const auto& r : runs) {
            row.push_back(num(100.0 * r.test_error[e], 2) + "%");
            values.push_back(r.test_error[e]);
        }
        rows.push_back(row);
        csv.push_back(values);
    }
    tut.step("test error after each epoch (BatchNorm evaluated with its running statistics)");
    tut.show(table(rows));
    for (const auto& r : runs) fmt::print("  time: {} batch {}: {:.1f} s\n", r.norm, r.batch_size, r.seconds);

    const std::string csv_path = tut.out_path("09_small_batch.csv"), png = tut.out_path("09_small_batch.png");
    write_csv(csv_path, header, csv);
    // Colour by normalisation, line style by batch size; whole epochs on x, percent on y as in the table.
    std::string plot = "set title 'Fashion-MNIST MLP: test error after each epoch'\nset xlabel 'epoch'\n"
                       "set ylabel 'test error (%)'\nset xtics 1\nset ytics 1\nset format y '%.0f%%'\nset grid\n"
                       "set key below\nset datafile separator ','\nplot ";
    for (std::size_t i = 0; i < runs.size(); ++i) {
        const bool bn = runs[i].norm == "BN", small = runs[i].batch_size < 128;
        plot += fmt::format("{}'{}' using 1:(100*${}) with linespoints lw 2 pt {} dt {} lc rgb '{}' title '{}'", i ? ", " : "",
                            csv_path, i + 2, bn ? 7 : 5, small ? 2 : 1, bn ? "#c0392b" : "#2471a3", rows[0][i + 1]);
    }
    if (gnuplot(plot, png)) tut.say("plot: " + png);
    tut.say("csv: " + csv_path);

    const auto final_error = [&](const std::string& norm, std::size_t b) {
        for (const auto& r : runs) {
            if (r.norm == norm && r.batch_size == b) return r.test_error.back();
        }
        return 0.0;
    };
    tut.step("final test error, batch 128 -> batch 4");
    for (const char* norm : {"BN", "LN"}) {
        tut.say(fmt::format("{} {}% -> {}%", norm, num(100 * final_error(norm, 128), 2), num(100 * final_error(norm, 4), 2)));
    }
    tut.say("the paper's claim: LN ~ BN at batch 128; at batch 4 BN degrades and LN does not.");
    tut.say("Compare with the rows above.");
    return 0;
}

#endif  // XGRAD_TUTORIAL_NO_MAIN

namespace tutorial_values {

using namespace xg;

namespace {

class ReLU : public nn::Module {
public:
    Tensor forward(const Tensor& x) override { return relu(x); }
};

std::shared_ptr<nn::Module> make_norm(std::size_t h, bool batch_norm) {
    if (batch_norm) return std::make_shared<nn::BatchNorm1d>(h);
    return std::make_shared<nn::LayerNorm>(h);
}

double test_error(nn::Module& model, const optim::TensorDataset& test) {
    NoGradGuard no_grad;
    model.eval();
    std::size_t wrong = 0;
    const std::size_t chunk = 1000;
    for (std::size_t start = 0; start < test.size(); start += chunk) {
        const std::size_t n = std::min(chunk, test.size() - start);
        const optim::TensorDataset part = test.subset(start, n);
        const Array logits = model.forward(Tensor(part.features())).value();
        for (std::size_t i = 0; i < n; ++i) {
            std::size_t best = 0;
            for (std::size_t c = 1; c < 10; ++c) best = logits(i, c) > logits(i, best) ? c : best;
            wrong += static_cast<std::int64_t>(best) != part.labels()(i);
        }
    }
    model.train();
    return static_cast<double>(wrong) / static_cast<double>(test.size());
}

}  // namespace

std::shared_ptr<nn::Sequential> make_mlp(std::size_t hidden, bool batch_norm) {
    auto net = std::make_shared<nn::Sequential>();
    net->push_back(std::make_shared<nn::Linear>(784, hidden));
    net->push_back(make_norm(hidden, batch_norm));
    net->push_back(std::make_shared<ReLU>());
    net->push_back(std::make_shared<nn::Linear>(hidden, hidden));
    net->push_back(make_norm(hidden, batch_norm));
    net->push_back(std::make_shared<ReLU>());
    net->push_back(std::make_shared<nn::Linear>(hidden, 10));
    return net;
}

std::vector<SmallBatchRun> a1_3_small_batch(const SmallBatchConfig& cfg) {
    optim::TensorDataset train = optim::load_fashion_mnist("train", cfg.data_dir);
    optim::TensorDataset test = optim::load_fashion_mnist("test", cfg.data_dir);
    if (cfg.train_samples && cfg.train_samples < train.size()) train = train.subset(0, cfg.train_samples);
    if (cfg.test_samples && cfg.test_samples < test.size()) test = test.subset(0, cfg.test_samples);

    std::vector<SmallBatchRun> runs;
    for (std::size_t batch : cfg.batch_sizes) {
        for (bool bn : {true, false}) {
            SmallBatchRun run;
            run.norm = bn ? "BN" : "LN";
            run.batch_size = batch;
            manual_seed(cfg.seed);  // same Linear initialisation for BN and LN
            auto model = make_mlp(cfg.hidden, bn);
            optim::Adam opt(model->parameters(), optim::AdamOptions(cfg.lr));
            optim::DataLoader loader(train, optim::DataLoaderOptions(batch).shuffle(true).seed(cfg.seed));
            const double start = tutorial::now_seconds();
            for (std::size_t epoch = 0; epoch < cfg.epochs; ++epoch) {
                optim::ProgressBar bar(loader.size(), fmt::format("{} batch {} epoch {}/{}", run.norm, batch, epoch + 1, cfg.epochs),
                                       cfg.progress ? optim::ProgressBar::Mode::automatic : optim::ProgressBar::Mode::quiet);
                for (const optim::Batch& b : loader) {
                    if (bn && b.x.size(0) == 1) continue;  // BatchNorm cannot train on a last batch of one
                    opt.zero_grad();
                    Tensor loss = nn::cross_entropy(model->forward(b.x), b.y);
                    loss.backward();
                    opt.step();
                    bar.update(loss.item());
                }
                run.train_loss.push_back(bar.mean_loss());
                run.test_error.push_back(test_error(*model, test));
                bar.finish(fmt::format("test error {:.4f}", run.test_error.back()));
            }
            run.seconds = tutorial::now_seconds() - start;
            runs.push_back(run);
        }
    }
    return runs;
}

}  // namespace tutorial_values
