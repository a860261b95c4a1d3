#include "tutorials/common/small_batch.hpp"

#include <fmt/format.h>

#include "core/ops.hpp"
#include "core/random.hpp"
#include "optim/adam.hpp"
#include "optim/training/data.hpp"
#include "optim/training/progress.hpp"
#include "tutorials/common/tutorial.hpp"

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
