// Finite-difference checks across the ranks of an MPI job (compiled into the distributed test
// program, tests/CMakeLists.txt, and run under mpirun -np 1, 2 and 3; ctest -L distributed).
//
// The loss is global, L = sum over ranks of sum(G_r * y_r), so a value on one rank moves the
// outputs of every rank (SyncBatchNorm's statistics span them all). Every rank walks every
// element of the global input in the same order; the rank that holds it perturbs it, all ranks
// run the forward and all-reduce their parts of L. Replicated parameters are perturbed on every
// rank at once. Tolerances are xg::gradcheck's defaults (eps 1e-6, atol 1e-5, rtol 1e-3).
#include <functional>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "distributed/collectives.hpp"
#include "distributed/data_parallel.hpp"
#include "nn/modules/activation.hpp"
#include "nn/modules/layers.hpp"
#include "distributed/sync_batchnorm.hpp"
#include "tests/distributed/distributed_support.hpp"

namespace xg_test_distributed_gradcheck {

using namespace xg;

namespace {

constexpr double kEps = 1e-6, kAtol = 1e-5, kRtol = 1e-3;

double all_ranks_sum(double local) {
    Array v = Array({local});
    distributed::all_reduce(v);
    return v(0);
}

// The worst (|analytic - numerical| - atol - rtol |numerical|) over every rank; <= 0 passes.
double excess(double analytic, double numerical) {
    return std::abs(analytic - numerical) - kAtol - kRtol * std::abs(numerical);
}

// Central difference of the global loss with respect to `value`, which `perturbed_here` says
// whether this rank holds (every rank calls loss() either way).
double central_difference(double& value, bool perturbed_here, const std::function<double()>& global_loss) {
    const double saved = value;
    if (perturbed_here) value = saved + kEps;
    const double plus = global_loss();
    if (perturbed_here) value = saved - kEps;
    const double minus = global_loss();
    if (perturbed_here) value = saved;
    return (plus - minus) / (2 * kEps);
}

double worst_of_all_ranks(double local) {
    Array v = Array({local});
    distributed::all_reduce(v, distributed::ReduceOp::MAX);
    return v(0);
}

void check_sync_batchnorm(const Shape& trailing, bool equal) {
    const int world = distributed::world_size(), me = distributed::rank();
    const auto [begin, end, global_shape] = xg::test::rank_rows(world, me, 2, equal, false, trailing);
    const std::size_t C = trailing[0];

    nn::SyncBatchNorm sync(static_cast<std::int64_t>(C), 1e-5, 0.1, true, false);
    sync.weight = Tensor(xg::test::global_randn({C}, 3, 0.5, 1.0));
    sync.bias = Tensor(xg::test::global_randn({C}, 4));
    Tensor x(xg::test::rows(xg::test::global_randn(global_shape, 1, 2.0, 1.0), begin, end), true);
    const Array G = xg::test::rows(xg::test::global_randn(global_shape, 2), begin, end);

    sync.forward(x).backward(Tensor(G));
    const Array dx = x.grad_value();
    Array dw = sync.weight.grad_value(), db = sync.bias.grad_value();
    distributed::all_reduce(dw);
    distributed::all_reduce(db);

    const auto global_loss = [&] {
        NoGradGuard no_grad;
        const Array y = sync.forward(Tensor(x.value())).value();
        double local = 0.0;
        for (std::size_t i = 0; i < y.size(); ++i) local += G.data()[i] * y.data()[i];
        return all_ranks_sum(local);
    };
    double worst = -1.0;
    const std::size_t per_row = [&] {
        std::size_t n = 1;
        for (std::size_t e : trailing) n *= e;
        return n;
    }();
    for (std::size_t j = 0; j < global_shape[0] * per_row; ++j) {  // every element of the global input
        const bool mine = j >= begin * per_row && j < end * per_row;
        double dummy = 0.0;
        double& value = mine ? x.node()->value.data()[j - begin * per_row] : dummy;
        const double numerical = central_difference(value, mine, global_loss);
        if (mine) worst = std::max(worst, excess(dx.data()[j - begin * per_row], numerical));
    }
    for (std::size_t c = 0; c < C; ++c) {
        worst = std::max(worst, excess(dw(c), central_difference(sync.weight.node()->value(c), true, global_loss)));
        worst = std::max(worst, excess(db(c), central_difference(sync.bias.node()->value(c), true, global_loss)));
    }
    INFO(fmt::format("(N, {}) {} counts over {} ranks: worst |analytic - numerical| - atol - rtol |numerical|",
                     fmt::join(trailing, ", "), equal ? "equal" : "unequal", world));
    CHECK(worst_of_all_ranks(worst) <= 0.0);
}

}  // namespace

TEST_CASE("gradcheck SyncBatchNorm over the ranks (2-D and 3-D, equal and unequal counts)", "[distributed][gradcheck]") {
    check_sync_batchnorm({3}, true);
    check_sync_batchnorm({3}, false);
    check_sync_batchnorm({2, 3}, false);
}

TEST_CASE("gradcheck DistributedDataParallel (the averaged gradient of the ranks' mean loss)", "[distributed][gradcheck]") {
    const int world = distributed::world_size(), me = distributed::rank();
    manual_seed(100 + static_cast<std::uint64_t>(me));  // different initial weights: the constructor must copy rank 0's
    auto net = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(3, 4), std::make_shared<nn::SyncBatchNorm>(4, 1e-5, 0.1, true, false),
        std::make_shared<nn::GELU>(), std::make_shared<nn::Linear>(4, 2)});
    nn::DistributedDataParallel ddp(net, 1e-4);  // a tiny bucket cap: several buckets
    CHECK(ddp.buckets.size() > 1);
    const std::size_t rows = 3;
    const Array X = xg::test::rows(xg::test::global_randn({rows * world, 3}, 7), rows * me, rows * (me + 1));
    const Array G = xg::test::rows(xg::test::global_randn({rows * world, 2}, 8), rows * me, rows * (me + 1));
    const auto local_loss = [&] { return mean(mul(ddp.forward(Tensor(X)), Tensor(G))); };

    local_loss().backward();
    ddp.reduce_gradients();
    const auto global_loss = [&] {
        NoGradGuard no_grad;
        return all_ranks_sum(local_loss().item()) / world;
    };
    double worst = -1.0;
    for (Tensor& p : ddp.parameters()) {
        const Array analytic = p.grad_value();
        for (std::size_t i = 0; i < analytic.size(); ++i) {
            worst = std::max(worst, excess(analytic.data()[i], central_difference(p.node()->value.data()[i], true, global_loss)));
        }
    }
    CHECK(worst_of_all_ranks(worst) <= 0.0);
}

}  // namespace xg_test_distributed_gradcheck
