// Train an MLP (784-256-256-10 with LayerNorm and GELU) on Fashion-MNIST with AdamW, linear
// warm-up then cosine decay, gradient clipping, a progress bar, a CSV metrics log and a
// checkpoint every epoch. Explained line by line in docs/training.md.
//
//   train_fashion_mlp                     one epoch on the full training set (quick default)
//   train_fashion_mlp --epochs 3          three epochs
//   train_fashion_mlp --epochs 5 --resume continue from <out>/checkpoint.npz
//   train_fashion_mlp --dtype float32     train in float32 (model.to(kFloat32), a float32 dataset)
// Other options: --batch-size 128 --lr 1e-3 --weight-decay 0.05 --warmup 200 --clip 1.0
//   --seed 0 --train-subset N (first N training images) --data DIR --out DIR
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "nn/nn.hpp"
#include "optim/optim.hpp"

using namespace xg;

namespace {

struct Args {
    std::int64_t epochs = 1;
    std::size_t batch_size = 128;
    double lr = 1e-3, weight_decay = 0.05, clip = 1.0;
    std::int64_t warmup = 200;
    std::uint64_t seed = 0;
    std::size_t train_subset = 0;  // 0 = all 60000
    std::string data = "/usr/share/datasets/fashion-mnist";
    std::string out = "train_fashion_mlp_out";
    bool resume = false;
    Dtype dtype = kFloat64;  // --dtype float32: dataset, batches, parameters, gradients and optimizer state in float32
};

Args parse_args(int argc, char** argv) {
    Args a;
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) fail("train_fashion_mlp", fmt::format("{} needs a value", flag));
            return argv[++i];
        };
        if (flag == "--epochs") a.epochs = std::stoll(value());
        else if (flag == "--batch-size") a.batch_size = std::stoul(value());
        else if (flag == "--lr") a.lr = std::stod(value());
        else if (flag == "--weight-decay") a.weight_decay = std::stod(value());
        else if (flag == "--warmup") a.warmup = std::stoll(value());
        else if (flag == "--clip") a.clip = std::stod(value());
        else if (flag == "--seed") a.seed = std::stoull(value());
        else if (flag == "--train-subset") a.train_subset = std::stoul(value());
        else if (flag == "--data") a.data = value();
        else if (flag == "--out") a.out = value();
        else if (flag == "--resume") a.resume = true;
        else if (flag == "--dtype") {
            const std::string name = value();
            if (name != "float32" && name != "float64")
                fail("train_fashion_mlp", fmt::format("--dtype must be float32 or float64, got '{}'", name));
            a.dtype = name == "float32" ? kFloat32 : kFloat64;
        }
        else if (flag == "--help" || flag == "-h") {
            fmt::print(
                "usage: train_fashion_mlp [--epochs N] [--resume] [--batch-size 128] [--lr 1e-3]\n"
                "                         [--weight-decay 0.05] [--warmup 200] [--clip 1.0] [--seed 0]\n"
                "                         [--train-subset N] [--data DIR] [--out DIR] [--dtype float64|float32]\n"
                "Trains a 784-256-256-10 MLP (LayerNorm, GELU) on Fashion-MNIST with AdamW, warm-up + cosine decay,\n"
                "clipping, a CSV metrics log and a checkpoint per epoch (--resume continues from it).\n"
                "--dtype float32 trains in float32 (default float64).\n"
                "  guide:    docs/training.md\n"
                "  run time: about 5 s of CPU per epoch of 60000 images (one epoch by default)\n"
                "  writes:   metrics.csv and checkpoint.npz into --out (default train_fashion_mlp_out)\n");
            std::exit(0);
        }
        else fail("train_fashion_mlp", fmt::format("unknown option '{}' (see --help)", flag));
    }
    if (a.epochs < 1) fail("train_fashion_mlp", "--epochs must be at least 1");
    return a;
}

std::shared_ptr<nn::Sequential> make_mlp() {
    return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(784, 256), std::make_shared<nn::LayerNorm>(256), std::make_shared<nn::GELU>(),
        std::make_shared<nn::Linear>(256, 256), std::make_shared<nn::LayerNorm>(256), std::make_shared<nn::GELU>(),
        std::make_shared<nn::Linear>(256, 10)});
}

// Weight decay on the weight matrices only; biases and LayerNorm gains/shifts (1-D) are exempt.
std::vector<optim::ParamGroupSpec> param_groups(const nn::Module& model) {
    std::vector<Tensor> decay, no_decay;
    for (const Tensor& p : model.parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
    return {{decay, std::nullopt, std::nullopt}, {no_decay, std::nullopt, 0.0}};
}

struct Evaluation {
    double loss = 0, accuracy = 0;
};

Evaluation evaluate(nn::Module& model, optim::DataLoader& loader) {
    model.eval();
    NoGradGuard no_grad;
    double loss_sum = 0;
    std::size_t correct = 0, seen = 0;
    for (const optim::Batch& b : loader) {
        const Tensor logits = model.forward(b.x);
        const std::size_t n = b.y.size(), classes = logits.size(1);
        loss_sum += nn::cross_entropy(logits, b.y, nn::Reduction::sum).item();
        const double* row = logits.data();
        for (std::size_t i = 0; i < n; ++i, row += classes) {
            const auto best = static_cast<std::int64_t>(std::max_element(row, row + classes) - row);
            correct += best == b.y(i);
        }
        seen += n;
    }
    model.train();
    return {loss_sum / static_cast<double>(seen), static_cast<double>(correct) / static_cast<double>(seen)};
}

// The template tests no article claim; like the tutorials it still ends with a "=>" line, saying
// what the run showed: its test accuracy against the runs docs/training.md measured with the same
// settings (the defaults, in float64 and, for one epoch, float32). One point is far more than the OpenBLAS
// kernels move it and far less than a broken loop loses; other settings have no reference.
void print_verdict(const Args& a, double accuracy) {
    const Args defaults;
    const bool default_settings = a.batch_size == defaults.batch_size && a.lr == defaults.lr &&
                                  a.weight_decay == defaults.weight_decay && a.clip == defaults.clip &&
                                  a.warmup == defaults.warmup && a.seed == defaults.seed && a.train_subset == 0;
    const double reference = a.epochs == 1 ? 0.8680 : a.epochs == 3 && a.dtype == kFloat64 ? 0.8880 : -1;  // docs/training.md
    const std::string run = fmt::format("test accuracy {:.2f} % after {} epoch{}", 100 * accuracy, a.epochs,
                                        a.epochs == 1 ? "" : "s");
    if (!default_settings || reference < 0) {
        fmt::print("=> {}; no reference for these settings (docs/training.md measured the defaults:\n"
                   "   86.80 % after 1 epoch, 88.80 % after 3)\n",
                   run);
    } else if (std::abs(accuracy - reference) <= 0.01) {
        fmt::print("=> the template trains as documented: {},\n   within 1 point of docs/training.md's {:.2f} %\n", run,
                   100 * reference);
    } else {
        fmt::print("=> {}: {:.2f} points from docs/training.md's {:.2f} % with the same settings;\n"
                   "   more than OpenBLAS kernels move it: check the data and the build\n",
                   run, 100 * (accuracy - reference), 100 * reference);
    }
}

}  // namespace

int main(int argc, char** argv) try {
    const Args args = parse_args(argc, argv);
    std::filesystem::create_directories(args.out);
    const std::string checkpoint_path = args.out + "/checkpoint.npz";
    manual_seed(args.seed);

    // The images in the model's dtype: a float32 dataset holds them natively (half the memory) and
    // its batches are float32 tensors.
    optim::TensorDataset train_set = optim::load_fashion_mnist("train", args.data, args.dtype);
    if (args.train_subset > 0) train_set = train_set.subset(0, std::min(args.train_subset, train_set.size()));
    const optim::TensorDataset test_set = optim::load_fashion_mnist("test", args.data, args.dtype);
    optim::DataLoader train_loader(train_set, optim::DataLoaderOptions(args.batch_size).shuffle(true).seed(args.seed));
    optim::DataLoader test_loader(test_set, 1000);

    auto model = make_mlp();
    model->to(args.dtype);  // float32: parameters and their gradients (and the optimizer's state) in float32
    optim::AdamW optimizer(param_groups(*model), optim::AdamWOptions(args.lr).weight_decay(args.weight_decay));
    const std::int64_t total_steps = args.epochs * static_cast<std::int64_t>(train_loader.size());
    optim::WarmupCosine schedule(optimizer, std::min(args.warmup, total_steps - 1), total_steps, 0.01);
    optim::Checkpoint checkpoint(*model, optimizer, &schedule, &train_loader);

    optim::TrainingProgress progress;
    if (args.resume && std::filesystem::exists(checkpoint_path)) {
        progress = checkpoint.load(checkpoint_path);
        fmt::print("resumed from {} at epoch {}, step {}\n", checkpoint_path, progress.epoch, progress.step);
    }
    optim::CsvLogger metrics(args.out + "/metrics.csv",
                             {"epoch", "step", "lr", "train_loss", "test_loss", "test_acc", "seconds"},
                             /*append=*/progress.epoch > 0);
    fmt::print("{}\n{} parameters ({}), {} training images, {} steps per epoch\n", model->to_string(),
               [&] { std::size_t n = 0; for (const Tensor& p : model->parameters()) n += p.numel(); return n; }(),
               dtype_name(args.dtype), train_set.size(), train_loader.size());
    std::fflush(stdout);  // before the progress bar writes to stderr

    Evaluation last;
    double train_seconds = 0;
    int epochs_run = 0;
    for (std::int64_t epoch = progress.epoch; epoch < args.epochs; ++epoch) {
        optim::ProgressBar bar(train_loader.size(), fmt::format("epoch {}/{}", epoch + 1, args.epochs));
        const auto start = std::chrono::steady_clock::now();
        for (const optim::Batch& batch : train_loader) {
            optimizer.zero_grad();
            // The batches have the dataset's dtype, the model's (a float64 input would promote every
            // result of a float32 model to float64, as in PyTorch).
            Tensor loss = nn::cross_entropy(model->forward(batch.x), batch.y);
            loss.backward();
            optim::clip_grad_norm(model->parameters(), args.clip);
            optimizer.step();
            schedule.step();
            ++progress.step;
            bar.update(loss.item());
        }
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        train_seconds += seconds;
        ++epochs_run;
        last = evaluate(*model, test_loader);
        progress.epoch = epoch + 1;
        metrics.log({static_cast<double>(progress.epoch), static_cast<double>(progress.step), schedule.lr(),
                     bar.mean_loss(), last.loss, last.accuracy, seconds});
        checkpoint.save(checkpoint_path, progress);
        bar.finish(fmt::format("test loss {:.4f}  test acc {:.4f}", last.loss, last.accuracy));
    }
    if (epochs_run == 0) {
        fmt::print("the checkpoint already has {} epochs; nothing to do (raise --epochs)\n", progress.epoch);
        return 0;
    }
    fmt::print("test accuracy {:.4f}, {:.1f} s per training epoch; metrics {}/metrics.csv, checkpoint {}\n",
               last.accuracy, train_seconds / static_cast<double>(epochs_run), args.out, checkpoint_path);
    print_verdict(args, last.accuracy);
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "train_fashion_mlp: %s\n", e.what());
    return 1;
}
