// Data-parallel training from a program built against the installed package, run under
// `mpiexec -np 2` by tests/consumer/install_and_build.cmake: each rank takes its half of one
// batch, DistributedDataParallel averages the gradients, and they must equal the gradients of one
// process on the whole batch (to 1e-12) on every rank. Rank 0 prints "ddp ok"; exits 1 (and says
// why) if not.
#include <cmath>
#include <cstdio>
#include <memory>

#include <xgrad/distributed/collectives.hpp>
#include <xgrad/distributed/data_parallel.hpp>
#include <xgrad/xgrad.hpp>

int main() {
    namespace dist = xg::distributed;
    dist::init();
    const int rank = dist::rank(), ranks = dist::world_size();
    const std::int64_t per_rank = 4;

    xg::Generator data(11);  // the same batch on every rank
    const xg::Tensor x = xg::randn({per_rank * ranks, 3}, data), y = xg::randn({per_rank * ranks, 2}, data);
    auto model = std::make_shared<xg::nn::Linear>(3, 2);
    xg::nn::DistributedDataParallel ddp(model);  // every rank now holds rank 0's parameters

    // One process on the whole batch, from the same parameters.
    xg::Tensor w(model->weight.value(), true), b(model->bias.value(), true);
    xg::nn::mse_loss(xg::nn::functional::linear(x, w, b), y).backward();

    const xg::Tensor mine = xg::narrow(x, 0, rank * per_rank, per_rank), target = xg::narrow(y, 0, rank * per_rank, per_rank);
    xg::nn::mse_loss(ddp.forward(mine), target).backward();
    ddp.reduce_gradients();

    double worst = 0.0;
    const auto compare = [&worst](const xg::Array& got, const xg::Array& want) {
        for (std::size_t i = 0; i < want.size(); ++i) worst = std::fmax(worst, std::fabs(got.data()[i] - want.data()[i]));
    };
    compare(model->weight.grad().value(), w.grad().value());
    compare(model->bias.grad().value(), b.grad().value());
    xg::Array worst_of_all = xg::Array({worst});
    dist::all_reduce(worst_of_all, dist::ReduceOp::MAX);
    if (rank == 0) std::printf("ranks %d, largest gradient difference to one process %.3g\n", ranks, worst_of_all(0));
    if (!(worst_of_all(0) <= 1e-12)) {
        if (rank == 0) std::printf("ddp: the averaged gradients differ from one process's\n");
        return 1;
    }
    if (rank == 0) std::printf("ddp ok\n");
    return 0;
}
