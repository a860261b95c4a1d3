// Tutorial 18: data-parallel training on Open MPI. BatchNorm's statistics span the batch, LayerNorm's
// one sample; split the batch between processes and the contrast becomes communication. Per-rank
// BatchNorm is "ghost" BatchNorm on B/N samples (Hoffer et al. 2017); SyncBatchNorm exchanges
// statistics in the forward and two sums in the backward and equals BatchNorm on the whole batch;
// LayerNorm exchanges nothing. Then: the one-pass variance of a naive sync against the Chan merge,
// and sequence parallelism, where LayerNorm's own weight gradients need an all-reduce.
// Guide: docs/tutorials/18-data-parallel.md. Started alone it relaunches itself under mpiexec on 2
// ranks; `mpiexec -np N build/tutorials/18_data_parallel` runs it on N.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "distributed/collectives.hpp"
#include "core/ops/ops.hpp"
#include "core/engine/random.hpp"
#include "distributed/data_parallel.hpp"
#include "nn/nn.hpp"
#include "distributed/sync_batchnorm.hpp"
#include "optim/sgd.hpp"
#include "optim/training/data.hpp"
#include "optim/training/distributed_sampler.hpp"
#include "tutorials/common/seed_stats.hpp"
#include "tutorials/common/tutorial.hpp"

using namespace xg;
using namespace xg::tutorial;
namespace dist = xg::distributed;

namespace {

constexpr int kRanks = 2;  // what a plain start relaunches on (the guide's output)

// ---- helpers ------------------------------------------------------------------------------------

Array rows_of(const Array& a, const std::vector<std::size_t>& indices) {
    const std::size_t row = a.size() / a.shape()[0];
    Shape shape(a.shape().begin(), a.shape().end());
    shape[0] = indices.size();
    Array out = Array::from_shape(shape);
    for (std::size_t i = 0; i < indices.size(); ++i) {
        std::copy(a.data() + indices[i] * row, a.data() + (indices[i] + 1) * row, out.data() + i * row);
    }
    return out;
}

std::vector<std::size_t> range(std::size_t begin, std::size_t end) {
    std::vector<std::size_t> r;
    for (std::size_t i = begin; i < end; ++i) r.push_back(i);
    return r;
}

double worst_over_ranks(double v) {
    Array a = Array({v});
    dist::all_reduce(a, dist::ReduceOp::MAX);
    return a(0);
}

enum class Norm { ghost_batch, sync_batch, layer };

// Linear(784, 64) -> norm -> ReLU -> Linear(64, 10); the same weights for a seed in every variant.
std::shared_ptr<nn::Sequential> make_mlp(Norm norm, std::uint64_t seed) {
    manual_seed(seed);
    auto first = std::make_shared<nn::Linear>(784, 64);
    auto last = std::make_shared<nn::Linear>(64, 10);
    std::shared_ptr<nn::Module> middle;
    if (norm == Norm::layer) {
        middle = std::make_shared<nn::LayerNorm>(64);
    } else if (norm == Norm::sync_batch) {
        middle = std::make_shared<nn::SyncBatchNorm>(64);
    } else {
        middle = std::make_shared<nn::BatchNorm1d>(64);
    }
    return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        first, middle, std::make_shared<nn::ReLU>(), last});
}

struct Data {
    optim::TensorDataset train, test;
};

// ---- training -----------------------------------------------------------------------------------

struct RunResult {
    double accuracy = 0;   // on the test subset, evaluation mode
    NamedArrays state;     // the trained weights and buffers
    std::uint64_t bytes_forward_backward = 0, bytes_gradients = 0;  // per step, this rank
};

// `steps` SGD steps on a global batch of `global_batch`, split between `replicas` ranks
// (1: this process alone, no DDP).
RunResult train(const Data& d, Norm norm, std::uint64_t seed, int replicas, int steps, std::size_t global_batch) {
    const int me = replicas == 1 ? 0 : dist::rank();
    auto model = make_mlp(norm, seed);
    std::shared_ptr<nn::DistributedDataParallel> ddp;
    if (replicas > 1) {
        ddp = std::make_shared<nn::DistributedDataParallel>(model);
        // The gradients' all-reduce in reduce_gradients() alone, so that step 2's two columns
        // separate; by default it starts during backward (the same bytes, the same bits).
        ddp->overlap = false;
    }
    optim::SGD sgd(model->parameters(), optim::SGDOptions(0.05).momentum(0.9));
    optim::DistributedSampler sampler(d.train.size(), replicas, me, true, seed);
    const std::size_t local = global_batch / static_cast<std::size_t>(replicas);
    const std::size_t per_epoch = sampler.num_samples() / local;
    RunResult r;
    for (int step = 0; step < steps; ++step) {
        sampler.set_epoch(step / static_cast<int>(per_epoch));
        const std::vector<std::size_t> order = sampler.indices();
        const std::size_t at = static_cast<std::size_t>(step) % per_epoch * local;
        const std::vector<std::size_t> mine(order.begin() + static_cast<std::ptrdiff_t>(at),
                                            order.begin() + static_cast<std::ptrdiff_t>(at + local));
        const optim::Batch b = d.train.batch(mine);
        sgd.zero_grad();
        const std::uint64_t before = dist::is_initialized() ? dist::bytes_sent() : 0;
        const Tensor logits = ddp ? ddp->forward(b.x) : (*model)(b.x);
        nn::cross_entropy(logits, b.y).backward();
        const std::uint64_t middle = dist::is_initialized() ? dist::bytes_sent() : 0;
        if (ddp) ddp->reduce_gradients();
        sgd.step();
        r.bytes_forward_backward = middle - before;
        r.bytes_gradients = (dist::is_initialized() ? dist::bytes_sent() : 0) - middle;
    }
    model->eval();
    NoGradGuard no_grad;
    const Array logits = (*model)(Tensor(d.test.features())).value();
    std::size_t correct = 0;
    for (std::size_t n = 0; n < d.test.size(); ++n) {
        std::size_t best = 0;
        for (std::size_t k = 1; k < 10; ++k) {
            if (logits(n, k) > logits(n, best)) best = k;
        }
        correct += static_cast<std::int64_t>(best) == d.test.labels()(n);
    }
    r.accuracy = 100.0 * static_cast<double>(correct) / static_cast<double>(d.test.size());
    r.state = model->state_dict();
    return r;
}

double state_diff(const NamedArrays& a, const NamedArrays& b) {
    double worst = 0;
    for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, max_abs_diff(a[i].second, b[i].second));
    return worst;
}

// ---- 1. ghost BatchNorm -------------------------------------------------------------------------

void ghost_batch_norm(Tutorial& tut, const Data& d, int steps, const std::vector<std::uint64_t>& seeds) {
    const int world = dist::world_size(), me = dist::rank();
    tut.section("P9.1", "per-rank BatchNorm is ghost BatchNorm on B/N samples");
    {
        const std::size_t B = 16, local = B / static_cast<std::size_t>(world);
        const Array x = rows_of(d.train.features(), range(0, B));
        auto lin = make_mlp(Norm::ghost_batch, 1);
        NoGradGuard no_grad;
        const Array h = (*(*lin)[0])(Tensor(x)).value();
        nn::BatchNorm1d global(64), per_rank(64);
        const Array y_global = global.forward(Tensor(h)).value();
        const std::vector<std::size_t> mine = range(local * static_cast<std::size_t>(me), local * static_cast<std::size_t>(me + 1));
        const Array y_rank = per_rank.forward(Tensor(rows_of(h, mine))).value();
        const double diff = worst_over_ranks(max_abs_diff(y_rank, rows_of(y_global, mine)));
        tut.step(fmt::format("one batch of B = {} images through Linear(784, 64), split over N = {} ranks", B, world));
        tut.say(fmt::format("each rank normalises its {} rows with their own mean and variance:", local));
        tut.say(fmt::format("largest |per-rank BatchNorm - BatchNorm over all {}| = {}", B, num(diff, 3)));
        tut.say("the per-rank output is exactly BatchNorm on a batch of B/N: ghost BatchNorm");
    }
    const std::size_t batch = 16;
    std::vector<double> ghost, sync;
    for (std::uint64_t seed : seeds) {
        ghost.push_back(train(d, Norm::ghost_batch, seed, world, steps, batch).accuracy);
        sync.push_back(train(d, Norm::sync_batch, seed, world, steps, batch).accuracy);
    }
    tut.step(fmt::format("train the MLP {} steps, global batch {} ({} per rank), seeds {}", steps, batch,
                         batch / static_cast<std::size_t>(world), fmt::join(seeds, ", ")));
    tut.say("test accuracy (%), mean ± std over the seeds:");
    tut.show(table({{"per-rank (ghost) BatchNorm", tutorial_values::mean_pm_std(ghost, 2)},
                    {"SyncBatchNorm (= global)", tutorial_values::mean_pm_std(sync, 2)}}));
    const auto ghost_sync = tutorial_values::paired_difference(sync, ghost);
    tut.say(tutorial_values::describe(ghost_sync, "ghost", "sync", 2));
    tut.say("(DDP copies rank 0's running statistics to every rank each step, as PyTorch does:");
    tut.say(" evaluation uses statistics gathered over rank 0's ghost batches only)");
    tut.conclude("per-rank BatchNorm trains another model (ghost BN on B/N), not a slower copy of the global one");
    // P9.1 has two halves: ghost batches do not hurt the accuracy, and they can improve it.
    tut.conclude(!ghost_sync.significant ? fmt::format("P9.1 partly: ghost BN does not hurt the accuracy beyond the spread of {} seeds;",
                                                       seeds.size())
                 : ghost_sync.mean > 0   ? "P9.1 holds: the ghost model is more accurate, beyond the seed spread"
                                         : "P9.1 does not hold: the ghost model is less accurate, beyond the seed spread");
    if (!ghost_sync.significant) tut.say("   that it can improve it does not show (a gain within the spread is no gain)");
}

// ---- 2. SyncBatchNorm equals global BatchNorm ---------------------------------------------------

void sync_equals_global(Tutorial& tut, const Data& d, int steps) {
    const int world = dist::world_size();
    tut.section("DP", "SyncBatchNorm equals BatchNorm on the whole batch");
    const std::size_t batch = 16;
    const RunResult parallel = train(d, Norm::sync_batch, 1, world, steps, batch);
    const RunResult single = train(d, Norm::ghost_batch, 1, 1, steps, batch);  // one process: global BN
    const double diff = worst_over_ranks(state_diff(parallel.state, single.state));
    tut.step(fmt::format("{} steps on {} ranks with SyncBatchNorm vs 1 process with BatchNorm1d on all {}", steps, world,
                         batch));
    tut.say(fmt::format("largest weight or running-statistic difference after training: {}", under(diff, 1e-10)));
    tut.say(fmt::format("test accuracy {} % vs {} %", num(parallel.accuracy, 2), num(single.accuracy, 2)));
    tut.conclude("with its statistics all-gathered and its two backward sums all-reduced, the split is invisible");
}

// ---- 3. LayerNorm: no statistics traffic --------------------------------------------------------

void layer_norm_traffic(Tutorial& tut, const Data& d, int steps) {
    const int world = dist::world_size();
    tut.section("DP", "LayerNorm trains identically on 1 and N ranks, with no statistics traffic");
    const std::size_t batch = 16;
    const RunResult parallel = train(d, Norm::layer, 1, world, steps, batch);
    const RunResult single = train(d, Norm::layer, 1, 1, steps, batch);
    tut.step(fmt::format("{} steps of the LayerNorm MLP on {} ranks vs 1 process", steps, world));
    tut.say(fmt::format("largest weight difference: {}", under(worst_over_ranks(state_diff(parallel.state, single.state)), 1e-10)));
    const RunResult ghost = train(d, Norm::ghost_batch, 1, world, 1, batch);
    const RunResult sync = train(d, Norm::sync_batch, 1, world, 1, batch);
    std::size_t weights = 0;
    for (const Tensor& p : make_mlp(Norm::layer, 1)->parameters()) weights += p.value().size();
    tut.step(fmt::format("bytes one rank hands to collectives in one training step (64 channels, {} weights):", weights));
    tut.show(table({{"layer type", "forward + backward", "gradient all-reduce"},
                    {"per-rank BatchNorm", fmt::format("{} B", ghost.bytes_forward_backward), fmt::format("{} B", ghost.bytes_gradients)},
                    {"SyncBatchNorm", fmt::format("{} B", sync.bytes_forward_backward), fmt::format("{} B", sync.bytes_gradients)},
                    {"LayerNorm", fmt::format("{} B", parallel.bytes_forward_backward), fmt::format("{} B", parallel.bytes_gradients)}}));
    tut.say("per-rank BatchNorm: rank 0's running statistics (2 x 64 + 1 values) broadcast by DDP;");
    tut.say("SyncBatchNorm: (count, mean, sum of squares) x 64 forward, (sum g, sum g(x - mean)) x 64 back,");
    tut.say("plus the same broadcast of running statistics (identical on every rank already)");
    tut.say(fmt::format("gradients: {} values + one flag per parameter tensor, the same for every model", weights));
    tut.conclude("LayerNorm's statistics never leave the sample: only the gradients cross between ranks");
}

// ---- 4. naive sync against the Chan merge -------------------------------------------------------

void naive_vs_chan(Tutorial& tut) {
    const int world = dist::world_size(), me = dist::rank();
    tut.section("P9.2", "the naive sync (E[x^2] - mean^2) against the Chan merge, inputs with a large mean");
    tut.step(fmt::format("1000 values per rank and channel, N(shift, 1), {} ranks; relative error of the", world));
    tut.say("global variance against a two-pass variance of the gathered values:");
    std::vector<std::vector<std::string>> rows{{"shift", "naive (detectron2)", "Chan merge (SyncBatchNorm)"}};
    double worst_merge = 0, naive_at_largest = 0;  // relative errors: the merge's worst, the naive form's at the largest shift
    for (double shift : {0.0, 1e4, 1e6, 1e8}) {
        Generator gen(40 + static_cast<std::uint64_t>(me));
        const std::size_t m = 1000;
        Array x = Array::from_shape({m, std::size_t{1}});
        for (double& v : x) v = shift + gen.normal();
        // naive: all-reduce (sum x, sum x^2, count), var = E[x^2] - E[x]^2 (biased)
        Array sums = Array({0.0, 0.0, static_cast<double>(m)});
        for (double v : x) {
            sums(0) += v;
            sums(1) += v * v;
        }
        dist::all_reduce(sums);
        const double mean = sums(0) / sums(2), naive = sums(1) / sums(2) - mean * mean;
        // Chan: SyncBatchNorm with momentum 1 leaves the global unbiased variance in running_var
        nn::SyncBatchNorm sync(1, 1e-5, 1.0);
        sync.forward(Tensor(x));
        const double chan = sync.running_var.value()(0) * (sums(2) - 1) / sums(2);
        // reference: two passes over every rank's values
        const Array all = dist::all_gather_rows(x);
        double total = 0, sq = 0;
        for (double v : all) total += v;
        const double mu = total / static_cast<double>(all.size());
        for (double v : all) sq += (v - mu) * (v - mu);
        const double exact = sq / static_cast<double>(all.size());
        rows.push_back({sci(shift, 0), sci(std::abs(naive - exact) / exact, 1), sci(std::abs(chan - exact) / exact, 1)});
        worst_merge = std::max(worst_merge, std::abs(chan - exact) / exact);
        naive_at_largest = std::abs(naive - exact) / exact;
    }
    tut.show(table(rows));
    tut.say("the naive form subtracts two numbers of size shift^2 to get one of size 1: at shift 1e8");
    tut.say("(shift^2 = 1e16, where doubles are 2 apart) nothing of the variance is left");
    // P9.2 holds when the merge keeps the variance to 1e-6 at every shift while the one-pass form
    // has lost at least its first two digits (1e-2) at the largest: both halves of the claim.
    const bool merge_accurate = worst_merge < 1e-6, naive_loses = naive_at_largest > 1e-2;
    tut.conclude(merge_accurate && naive_loses ? "holds: merge (count, mean, centred sum of squares) per rank, never E[x^2]"
                 : merge_accurate              ? "partly: the merge keeps the variance, but E[x^2] - mean^2 keeps it here too"
                                               : "not shown: the merge loses the variance's digits too");
}

// ---- 5. sequence parallelism --------------------------------------------------------------------

void sequence_parallel(Tutorial& tut) {
    const int world = dist::world_size(), me = dist::rank();
    tut.section("P9.3", "sequence parallelism, simulated: LayerNorm's weight gradients are partial sums");
    const std::size_t T = 12, D = 16, local = T / static_cast<std::size_t>(world);
    const Array x = [&] {
        Generator gen(5);
        return randn({T, D}, gen).value();
    }();
    const Array g = [&] {
        Generator gen(6);
        return randn({T, D}, gen).value();
    }();
    manual_seed(3);
    nn::LayerNorm full(static_cast<std::int64_t>(D)), part(static_cast<std::int64_t>(D));
    full.weight = Tensor(randn({D}));
    part.weight = full.weight;
    Tensor x_full(x, true);
    full.forward(x_full).backward(Tensor(g));
    const std::vector<std::size_t> mine = range(local * static_cast<std::size_t>(me), local * static_cast<std::size_t>(me + 1));
    Tensor x_part(rows_of(x, mine), true);
    part.forward(x_part).backward(Tensor(rows_of(g, mine)));
    tut.step(fmt::format("a sequence of {} tokens of width {}, split over {} ranks ({} tokens each);", T, D, world, local));
    tut.say("each rank runs LayerNorm(16) on its tokens: no statistics cross (they are per token)");
    const Array gamma_local = part.weight.grad_value();
    const std::vector<Array> gathered = dist::all_gather(gamma_local);
    const double input_diff = worst_over_ranks(max_abs_diff(x_part.grad_value(), rows_of(x_full.grad_value(), mine)));
    tut.say(fmt::format("input gradients vs the whole sequence's: {}", under(input_diff, 1e-12)));
    tut.step("without an all-reduce, the gamma gradients are each rank's partial sums:");
    tut.say(fmt::format("|grad gamma rank 0 - rank 1| up to {}", num(max_abs_diff(gathered[0], gathered[1]), 3)));
    const double gamma_diff = worst_over_ranks(max_abs_diff(gamma_local, full.weight.grad_value()));
    tut.say(fmt::format("|grad gamma on a rank - the full sequence's| up to {}", num(gamma_diff, 3)));
    tut.say("each rank would step its replicated gamma differently: the copies drift apart");
    tut.say("(Megatron-LM issues 443 and 1446: final_layernorm gradients that differ across ranks)");
    Array gamma_sum = gamma_local;
    dist::all_reduce(gamma_sum);
    tut.step("with an all-reduce (sum) of the gamma and beta gradients over the sequence ranks:");
    const double reduced_diff = worst_over_ranks(max_abs_diff(gamma_sum, full.weight.grad_value()));
    tut.say(fmt::format("|grad gamma - the full sequence's| {}", under(reduced_diff, 1e-12)));
    // P9.3 holds when the input gradients need no communication (equal to 1e-12), the gamma
    // gradients do (a rank's partial sum is off by more than 1e-6) and the all-reduce repairs them.
    const bool local_exact = input_diff < 1e-12, partial = gamma_diff > 1e-6, repaired = reduced_diff < 1e-12;
    tut.conclude(world < 2 ? "cannot decide on one rank: no token is split off"
                 : local_exact && partial && repaired
                     ? "holds: split the tokens and LayerNorm's activations need nothing, its weights an all-reduce"
                     : "not shown: the measured gradients above do not split as the claim says");
}

// Started alone (not by mpiexec): run again under mpiexec on kRanks ranks, with the same arguments.
void relaunch_under_mpiexec(int argc, char** argv) {
    if (std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr) return;
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);  // CI runs as root
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
    const std::string ranks = std::to_string(kRanks);
    std::vector<std::string> args{XGRAD_MPIEXEC, "--oversubscribe", "--bind-to", "none", "-np", ranks, "/proc/self/exe"};
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) args.back() = std::string(self, static_cast<std::size_t>(n));
    for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
    std::vector<char*> c_args;
    for (std::string& a : args) c_args.push_back(a.data());
    c_args.push_back(nullptr);
    std::fflush(stdout);
    execv(XGRAD_MPIEXEC, c_args.data());
    std::fprintf(stderr, "18_data_parallel: could not start %s\n", XGRAD_MPIEXEC);
    std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
    const About about{"18 Data-parallel training: ghost, sync and no statistics", "P9.1, P9.2, P9.3",
                      "docs/tutorials/18-data-parallel.md", "about 40 s on 2 ranks",
                      "5 seeds and 1500 steps instead of 3 seeds and 200", ""};
    parse_flags(argc, argv, about);  // --help and bad arguments end here, before any relaunch
    relaunch_under_mpiexec(argc, argv);
    dist::init();
    if (dist::rank() != 0) std::freopen("/dev/null", "w", stdout);  // one rank speaks
    Tutorial tut(argc, argv, about);
    const int steps = tut.full() ? 1500 : 200;  // the ghost/sync comparison; the equivalence runs take half
    const std::vector<std::uint64_t> seeds = tut.full() ? std::vector<std::uint64_t>{1, 2, 3, 4, 5} : std::vector<std::uint64_t>{1, 2, 3};
    tut.step(fmt::format("{} ranks; Fashion-MNIST, the first 6000 training and 2000 test images", dist::world_size()));
    tut.say("model: Linear(784, 64) -> norm -> ReLU -> Linear(64, 10); SGD lr 0.05, momentum 0.9");
    Data d{optim::load_fashion_mnist("train").subset(0, 6000), optim::load_fashion_mnist("test").subset(0, 2000)};
    const double start = now_seconds();
    ghost_batch_norm(tut, d, steps, seeds);
    sync_equals_global(tut, d, steps / 2);
    layer_norm_traffic(tut, d, steps / 2);
    naive_vs_chan(tut);
    sequence_parallel(tut);
    tut.say(fmt::format("time: {:.1f} s", now_seconds() - start));
    return 0;
}
