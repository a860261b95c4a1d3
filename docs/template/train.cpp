// Fashion-MNIST classifier: a template to copy. An MLP 784-128-10 with LayerNorm and GELU,
// cross-entropy, AdamW, a progress bar and a checkpoint after every epoch (rerun to resume).
//   train [--epochs N] [--steps N (stop after N steps in all)] [--data DIR] [--out DIR]
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>

#include <xgrad/xgrad.hpp>

using namespace xg;

// Fraction of `loader`'s samples whose largest logit is the label.
double accuracy(nn::Module& model, optim::DataLoader& loader) {
    NoGradGuard no_grad;
    model.eval();
    std::size_t correct = 0;
    for (const optim::Batch& b : loader) {
        const Tensor logits = model.forward(b.x);
        const std::size_t classes = logits.size(1);
        for (std::size_t i = 0; i < b.y.size(); ++i) {
            const double* row = logits.data() + i * classes;
            correct += std::max_element(row, row + classes) - row == b.y(i);
        }
    }
    model.train();
    return static_cast<double>(correct) / static_cast<double>(loader.dataset().size());
}

int main(int argc, char** argv) try {
    std::int64_t epochs = 2, max_steps = std::numeric_limits<std::int64_t>::max();
    std::string data = "/usr/share/datasets/fashion-mnist", out = "train_out";
    for (int i = 1; i < argc; i += 2) {
        const std::string flag = argv[i], value = i + 1 < argc ? argv[i + 1] : "";
        if (value.empty()) fail("train", flag + " needs a value");
        if (flag == "--epochs") epochs = std::stoll(value);
        else if (flag == "--steps") max_steps = std::stoll(value);
        else if (flag == "--data") data = value;
        else if (flag == "--out") out = value;
        else fail("train", "unknown option " + flag);
    }
    std::filesystem::create_directories(out);
    const std::string checkpoint_path = out + "/checkpoint.npz";
    manual_seed(0);

    const optim::TensorDataset train_set = optim::load_fashion_mnist("train", data);
    const optim::TensorDataset test_set = optim::load_fashion_mnist("test", data);
    optim::DataLoader train_loader(train_set, optim::DataLoaderOptions(128).shuffle(true).seed(0));
    optim::DataLoader test_loader(test_set, 1000);

    auto model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(784, 128), std::make_shared<nn::LayerNorm>(128),
        std::make_shared<nn::GELU>(), std::make_shared<nn::Linear>(128, 10)});
    optim::AdamW optimizer(model->parameters(), optim::AdamWOptions(1e-3));
    optim::Checkpoint checkpoint(*model, optimizer, nullptr, &train_loader);
    optim::TrainingProgress progress;
    if (std::filesystem::exists(checkpoint_path)) progress = checkpoint.load(checkpoint_path);
    fmt::print("{}\nstarting at epoch {}, step {}\n", model->to_string(), progress.epoch, progress.step);
    std::fflush(stdout);  // the progress bar writes to stderr

    for (std::int64_t epoch = progress.epoch; epoch < epochs && progress.step < max_steps; ++epoch) {
        optim::ProgressBar bar(train_loader.size(), fmt::format("epoch {}/{}", epoch + 1, epochs));
        for (const optim::Batch& batch : train_loader) {
            optimizer.zero_grad();
            Tensor loss = nn::cross_entropy(model->forward(batch.x), batch.y);
            loss.backward();
            optimizer.step();
            bar.update(loss.item());
            if (++progress.step == max_steps) break;  // the checkpoint keeps the place in the epoch
        }
        if (progress.step < max_steps) progress.epoch = epoch + 1;
        checkpoint.save(checkpoint_path, progress);
        bar.finish(fmt::format("test acc {:.4f}", accuracy(*model, test_loader)));
    }
    fmt::print("done: epoch {}, step {}, checkpoint {}\n", progress.epoch, progress.step, checkpoint_path);
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
}
