// The program behind tests/distributed/faults.cmake: a small data-parallel training run (an MLP
// with SyncBatchNorm under DistributedDataParallel, fed by DistributedSampler) that can fail on
// purpose, checkpoint on rank 0 and resume on any number of ranks.
//
//   faults throwing_rank          rank 1 (or 0 alone) passes SyncBatchNorm a bad input at step 2
//   faults killed_rank            rank 1 (or 0 alone) kills itself at step 2, mid all_reduce
//   faults train STEPS OUT.npz [--checkpoint-at S CKPT] [--die-while-saving] [--resume CKPT]
//   faults compare A.npz B.npz    (one process) exit 1 unless every array agrees within 1e-10
//   faults step CKPT              (one process) prints the checkpoint's step
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "distributed/collectives.hpp"
#include "core/io/io.hpp"
#include "distributed/data_parallel.hpp"
#include "nn/modules/activation.hpp"
#include "nn/modules/layers.hpp"
#include "nn/functional/losses.hpp"
#include "distributed/sync_batchnorm.hpp"
#include "optim/sgd.hpp"
#include "optim/training/checkpoint.hpp"
#include "optim/training/distributed_sampler.hpp"

using namespace xg;

namespace {

constexpr std::size_t kSamples = 48, kGlobalBatch = 12, kIn = 6, kHidden = 8, kOut = 3;

Array data(const Shape& shape, std::uint64_t seed) {
    Generator gen(seed);
    return randn(shape, gen).value();
}

Array gather_rows(const Array& a, const std::vector<std::size_t>& indices) {
    const std::size_t row = a.size() / a.shape()[0];
    Shape shape(a.shape().begin(), a.shape().end());
    shape[0] = indices.size();
    Array out = Array::from_shape(shape);
    for (std::size_t i = 0; i < indices.size(); ++i) {
        std::copy(a.data() + indices[i] * row, a.data() + (indices[i] + 1) * row, out.data() + i * row);
    }
    return out;
}

struct Options {
    int steps = 0;
    std::string out, checkpoint, resume;
    int checkpoint_at = -1;
    bool die_while_saving = false;
    std::string fault;  // throwing_rank, killed_rank or empty
};

int train(const Options& o) {
    distributed::init();
    const int world = distributed::world_size(), me = distributed::rank();
    if (kGlobalBatch % static_cast<std::size_t>(world) != 0) fail("faults", fmt::format("{} ranks do not divide the batch", world));
    manual_seed(3);
    auto model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(kIn, kHidden), std::make_shared<nn::SyncBatchNorm>(kHidden),
        std::make_shared<nn::GELU>(), std::make_shared<nn::Linear>(kHidden, kOut)});
    nn::DistributedDataParallel ddp(model);
    optim::SGD sgd(model->parameters(), optim::SGDOptions(0.05).momentum(0.9));
    optim::Checkpoint checkpoint(*model, sgd);
    optim::TrainingProgress progress;
    if (!o.resume.empty()) progress = checkpoint.load(o.resume);  // every rank reads the same file

    const Array X = data({kSamples, kIn}, 11), T = data({kSamples, kOut}, 12);
    const std::size_t local_batch = kGlobalBatch / static_cast<std::size_t>(world);
    optim::DistributedSampler sampler(kSamples, world, me, true, 5);
    const std::int64_t per_epoch = static_cast<std::int64_t>(sampler.num_samples() / local_batch);
    const int faulty_rank = world > 1 ? 1 : 0;
    for (; progress.step < o.steps; ++progress.step) {
        sampler.set_epoch(progress.step / per_epoch);
        const std::vector<std::size_t> order = sampler.indices();
        const std::size_t at = static_cast<std::size_t>(progress.step % per_epoch) * local_batch;
        std::vector<std::size_t> mine(order.begin() + static_cast<std::ptrdiff_t>(at),
                                      order.begin() + static_cast<std::ptrdiff_t>(at + local_batch));
        Array x = gather_rows(X, mine);
        if (o.fault == "throwing_rank" && progress.step == 2 && me == faulty_rank) x = xt::zeros<double>({local_batch, kIn + 1});
        sgd.zero_grad();
        const Tensor loss = nn::mse_loss(ddp.forward(Tensor(x)), Tensor(gather_rows(T, mine)));
        loss.backward();
        if (o.fault == "killed_rank" && progress.step == 2 && me == faulty_rank) {
            std::fprintf(stderr, "rank %d: killing itself at step 2\n", me);
            std::raise(SIGKILL);
        }
        ddp.reduce_gradients();
        sgd.step();
        if (me == 0) std::printf("step %lld loss %.6f\n", static_cast<long long>(progress.step), loss.item());
        if (progress.step + 1 == o.checkpoint_at) {
            optim::TrainingProgress saved{progress.step + 1, progress.step / per_epoch};
            if (me == 0) {
                checkpoint.save(o.checkpoint, saved, [&](const std::string&) {
                    if (o.die_while_saving) std::raise(SIGKILL);  // after writing the temporary file, before the rename
                });
            }
            distributed::barrier();  // nobody goes on before the checkpoint is complete
        }
    }
    if (me == 0 && !o.out.empty()) save_npz(o.out, model->state_dict());
    return 0;
}

int compare(const std::string& a_path, const std::string& b_path) {
    const NamedArrays a = load_npz(a_path), b = load_npz(b_path);
    if (a.size() != b.size()) {
        std::fprintf(stderr, "%zu vs %zu arrays\n", a.size(), b.size());
        return 1;
    }
    double worst = 0.0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (a[i].first != b[i].first || a[i].second.shape() != b[i].second.shape()) {
            std::fprintf(stderr, "entry %zu: %s vs %s\n", i, a[i].first.c_str(), b[i].first.c_str());
            return 1;
        }
        for (std::size_t k = 0; k < a[i].second.size(); ++k) {
            worst = std::max(worst, std::abs(a[i].second.data()[k] - b[i].second.data()[k]));
        }
    }
    std::printf("largest difference %.3g\n", worst);
    return worst <= 1e-10 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    const std::vector<std::string> args(argv + 1, argv + argc);
    if (args.size() == 3 && args[0] == "compare") return compare(args[1], args[2]);
    if (args.size() == 2 && args[0] == "step") {
        for (const auto& [key, value] : load_npz(args[1])) {
            if (key == "meta.step") std::printf("step %.0f\n", value());
        }
        return 0;
    }
    Options o;
    if (!args.empty() && (args[0] == "throwing_rank" || args[0] == "killed_rank")) {
        o.fault = args[0];
        o.steps = 4;
        return train(o);
    }
    if (args.size() < 3 || args[0] != "train") {
        std::fprintf(stderr, "usage: see the top of tests/distributed/faults.cpp\n");
        return 2;
    }
    o.steps = std::atoi(args[1].c_str());
    o.out = args[2];
    for (std::size_t i = 3; i < args.size(); ++i) {
        if (args[i] == "--checkpoint-at" && i + 2 < args.size()) {
            o.checkpoint_at = std::atoi(args[++i].c_str());
            o.checkpoint = args[++i];
        } else if (args[i] == "--die-while-saving") {
            o.die_while_saving = true;
        } else if (args[i] == "--resume" && i + 1 < args.size()) {
            o.resume = args[++i];
        } else {
            std::fprintf(stderr, "unknown argument %s\n", args[i].c_str());
            return 2;
        }
    }
    return train(o);
}
