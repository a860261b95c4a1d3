// The data-parallel row of scripts/bench.sh --data-parallel: the Fashion-MNIST MLP training step of
// the main benchmark (784-256-256-10, LayerNorm or SyncBatchNorm, GELU, Adam) on a global batch of
// 64 split between the ranks of the job, and the all-reduce's bandwidth. Run under mpiexec -np N;
// rank 0 prints. Median of the timed repetitions, after warm-up; every rank times the same steps.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/distributed/collectives.hpp"
#include "core/engine/random.hpp"
#include "core/engine/threads.hpp"
#include "nn/modules/distributed_data_parallel.hpp"
#include "nn/modules/layers.hpp"
#include "nn/functional/losses.hpp"
#include "nn/modules/norm_layers.hpp"
#include "nn/modules/sync_batchnorm.hpp"
#include "optim/adam.hpp"

using namespace xg;

namespace {

double seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Median time of one step (ms) over `reps`, each rank timing the same steps; the slowest rank's.
double step_ms(bool batch_norm, std::size_t global_batch, int reps) {
    const int world = distributed::world_size();
    const std::size_t batch = global_batch / static_cast<std::size_t>(world);
    auto norm = [batch_norm]() -> std::shared_ptr<nn::Module> {
        if (batch_norm) return std::make_shared<nn::SyncBatchNorm>(256);
        return std::make_shared<nn::LayerNorm>(256);
    };
    manual_seed(1);
    auto model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(784, 256), norm(), std::make_shared<nn::GELU>(),
        std::make_shared<nn::Linear>(256, 256), norm(), std::make_shared<nn::GELU>(), std::make_shared<nn::Linear>(256, 10)});
    nn::DistributedDataParallel ddp(model);
    optim::Adam adam(model->parameters(), optim::AdamOptions(1e-3));
    Generator gen(11 + static_cast<std::uint64_t>(distributed::rank()));
    const Tensor x = randn({batch, 784}, gen);
    IndexArray targets = IndexArray::from_shape({batch});
    for (std::size_t i = 0; i < batch; ++i) targets(i) = static_cast<std::int64_t>((i * 7) % 10);
    std::vector<double> times;
    for (int r = -5; r < reps; ++r) {
        distributed::barrier();
        const double start = seconds();
        adam.zero_grad();
        nn::cross_entropy(ddp.forward(x), targets).backward();
        ddp.reduce_gradients();
        adam.step();
        Array t = Array({seconds() - start});
        distributed::all_reduce(t, distributed::ReduceOp::MAX);
        if (r >= 0) times.push_back(t(0) * 1e3);
    }
    return median(times);
}

// all_reduce of `bytes`: median time (ms).
double all_reduce_ms(std::size_t bytes, int reps) {
    Array a = xt::ones<double>({bytes / sizeof(double)});
    std::vector<double> times;
    for (int r = -3; r < reps; ++r) {
        distributed::barrier();
        const double start = seconds();
        distributed::all_reduce(a);
        Array t = Array({seconds() - start});
        distributed::all_reduce(t, distributed::ReduceOp::MAX);
        if (r >= 0) times.push_back(t(0) * 1e3);
    }
    return median(times);
}

}  // namespace

int main(int argc, char** argv) {
    distributed::init();
    set_num_threads(1);
    const int reps = argc > 1 ? std::atoi(argv[1]) : 50;
    const int world = distributed::world_size();
    const bool speak = distributed::rank() == 0;
    for (bool batch_norm : {false, true}) {
        const double ms = step_ms(batch_norm, 64, reps);
        if (speak) {
            std::printf("xgrad  %d rank%s  MLP step 784-256-256-10 %s+GELU, global b64 (%d per rank): %.3f ms\n", world,
                        world > 1 ? "s" : " ", batch_norm ? "SyncBN" : "LN", 64 / world, ms);
        }
    }
    for (std::size_t mb : {1, 16}) {
        const std::size_t bytes = mb << 20;
        const double ms = all_reduce_ms(bytes, reps / 5 + 5);
        // bus bandwidth: what each rank sends and receives in a ring, 2 (N - 1)/N S per rank
        const double bus = world > 1 ? 2.0 * (world - 1) / world * static_cast<double>(bytes) / (ms * 1e-3) / 1e9 : 0.0;
        if (speak) {
            std::printf("xgrad  %d rank%s  all_reduce %2zu MiB: %.3f ms, algorithm bandwidth %.2f GB/s, bus %.2f GB/s\n", world,
                        world > 1 ? "s" : " ", mb, ms, static_cast<double>(bytes) / (ms * 1e-3) / 1e9, bus);
        }
    }
    return 0;
}
