// SyncBatchNorm over the ranks of the job equals BatchNorm on the concatenated batch: outputs,
// input gradients, weight and bias gradients (summed over the ranks), running statistics, within
// 1e-12, with equal and unequal per-rank counts (and a rank with no rows). Run under mpirun
// -np 2 and -np 3 (ctest -L distributed).
#include <cstring>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/engine/kernel_tier.hpp"
#include "distributed/collectives.hpp"
#include "nn/modules/image_norm.hpp"
#include "nn/modules/layers.hpp"
#include "nn/modules/norm_layers.hpp"
#include "distributed/sync_batchnorm.hpp"
#include "optim/sgd.hpp"
#include "tests/distributed/distributed_support.hpp"
#include "tests/support/float32_nn_twins.hpp"

namespace xg_test_sync_batchnorm {

using namespace xg;
using xg::test::max_diff_all_ranks;

namespace {

struct Case {
    Shape trailing;  // the axes after N: (C), (C, L) or (C, H, W)
    bool equal;
    bool empty_rank;
};

std::string describe(const Case& c) {
    return fmt::format("(N, {}) {}{}", fmt::join(c.trailing, ", "), c.equal ? "equal counts" : "unequal counts",
                       c.empty_rank ? ", rank 1 empty" : "");
}

std::shared_ptr<nn::BatchNormBase> reference_norm(const Case& c, std::size_t C) {
    if (c.trailing.size() == 3) return std::make_shared<nn::BatchNorm2d>(static_cast<std::int64_t>(C));
    return std::make_shared<nn::BatchNorm1d>(static_cast<std::int64_t>(C));
}

void check_equivalence(const Case& c) {
    const int world = distributed::world_size(), me = distributed::rank();
    const auto [begin, end, global_shape] = xg::test::rank_rows(world, me, 3, c.equal, c.empty_rank, c.trailing);
    const std::size_t C = c.trailing[0];

    auto sync = std::make_shared<nn::SyncBatchNorm>(static_cast<std::int64_t>(C));
    auto ref = reference_norm(c, C);
    const Array weight = xg::test::global_randn({C}, 5, 0.5, 1.0), bias = xg::test::global_randn({C}, 6);
    sync->weight = Tensor(weight);
    sync->bias = Tensor(bias);
    ref->weight = Tensor(weight);
    ref->bias = Tensor(bias);

    // Two training steps, so that the running statistics are updated twice.
    for (std::uint64_t step = 0; step < 2; ++step) {
        const Array X = xg::test::global_randn(global_shape, 10 + step, 3.0, 2.0);
        const Array G = xg::test::global_randn(global_shape, 20 + step);
        sync->zero_grad();
        ref->zero_grad();
        Tensor x(xg::test::rows(X, begin, end), true), x_ref(X, true);
        Tensor y = sync->forward(x), y_ref = ref->forward(x_ref);
        y.backward(Tensor(xg::test::rows(G, begin, end)));
        y_ref.backward(Tensor(G));

        Array dw = sync->weight.grad_value(), db = sync->bias.grad_value();
        distributed::all_reduce(dw);
        distributed::all_reduce(db);
        INFO(describe(c) << ", step " << step << ", " << world << " ranks");
        CHECK(max_diff_all_ranks(y.value(), xg::test::rows(y_ref.value(), begin, end)) <= 1e-12);
        CHECK(max_diff_all_ranks(x.grad_value(), xg::test::rows(x_ref.grad_value(), begin, end)) <= 1e-12);
        CHECK(max_diff_all_ranks(dw, ref->weight.grad_value()) <= 1e-12);
        CHECK(max_diff_all_ranks(db, ref->bias.grad_value()) <= 1e-12);
        CHECK(max_diff_all_ranks(sync->running_mean.value(), ref->running_mean.value()) <= 1e-12);
        CHECK(max_diff_all_ranks(sync->running_var.value(), ref->running_var.value()) <= 1e-12);
        CHECK(sync->num_batches_tracked.item() == ref->num_batches_tracked.item());
    }
    // Evaluation normalises with the (identical) running statistics, without communication.
    sync->eval();
    ref->eval();
    const Array X = xg::test::global_randn(global_shape, 30, 3.0, 2.0);
    const Tensor y = sync->forward(Tensor(xg::test::rows(X, begin, end)));
    CHECK(max_diff_all_ranks(y.value(), xg::test::rows(ref->forward(Tensor(X)).value(), begin, end)) <= 1e-12);
}

}  // namespace

TEST_CASE("SyncBatchNorm equals BatchNorm on the concatenated batch", "[distributed][sync_batchnorm]") {
    for (const Case& c : {Case{{4}, true, false}, Case{{4}, false, false}, Case{{3, 5}, true, false},
                          Case{{3, 5}, false, false}, Case{{2, 3, 2}, false, false}, Case{{4}, false, true}}) {
        check_equivalence(c);
    }
}

// The float32 twin (issue 28: one for every module): each rank's SyncBatchNorm in float32 against
// float64 on the same rows, the same collectives in both runs. Condition 13, BatchNorm's
// (tests/batch_norm/test_batch_norm_float32.cpp): the statistics are BatchNorm's over the global
// batch, merged in float64 (Chan's formula) whatever the storage, so the roundings on the way from
// an input to an output or a gradient are BatchNorm's. That derivation takes kappa ~ 1: centred
// inputs, 8 or more rows per rank (a few rows with a mean of 2 sigma give a sample kappa of 10 and
// more). Unequal counts, so the merge is exercised.
TEST_CASE("float32 twin: SyncBatchNorm agrees with float64 on every rank", "[distributed][sync_batchnorm][float32]") {
    const int me = distributed::rank();
    const auto call = [](nn::Module& m, const Tensor& x) { return std::vector<Tensor>{m(x)}; };
    for (const Shape& trailing : {Shape{4}, Shape{3, 5}}) {
        const auto [begin, end, global_shape] = xg::test::rank_rows(distributed::world_size(), me, 8, false, false, trailing);
        const auto sync = std::make_shared<nn::SyncBatchNorm>(static_cast<std::int64_t>(trailing[0]));
        const Tensor x(xg::test::rows(xg::test::global_randn(global_shape, 40), begin, end), kFloat64, true);
        xg::test::check_float32_twin(fmt::format("SyncBatchNorm (N, {}) rank {}", fmt::join(trailing, ", "), me),
                                     xg_test_support::module_twin(sync, call), xg_test_support::module_twin_inputs(*sync, x), 13,
                                     xg::test::TwinNorm::normwise);
    }
}

TEST_CASE("SyncBatchNorm: a global batch of one value per channel throws on every rank", "[distributed][sync_batchnorm]") {
    nn::SyncBatchNorm sync(2);
    const bool first = distributed::rank() == 0;
    const Tensor x = Tensor(xt::zeros<double>({first ? std::size_t{1} : std::size_t{0}, std::size_t{2}}));
    CHECK_THROWS_WITH(sync.forward(x), Catch::Contains("SyncBatchNorm") && Catch::Contains("more than 1 value per channel"));
}

TEST_CASE("convert_sync_batchnorm replaces BatchNorm1d and BatchNorm2d, keeping their state", "[distributed][sync_batchnorm]") {
    auto bn = std::make_shared<nn::BatchNorm1d>(3, 1e-3, 0.2);
    bn->running_mean.mutable_value() = Array({1.0, 2.0, 3.0});
    auto net = std::make_shared<nn::Sequential>(
        std::initializer_list<std::shared_ptr<nn::Module>>{std::make_shared<nn::Linear>(2, 3), bn,
                                                            std::make_shared<nn::BatchNorm2d>(4)});
    auto converted = nn::convert_sync_batchnorm(net);
    CHECK(converted == net);
    auto sync = std::dynamic_pointer_cast<nn::SyncBatchNorm>((*net)[1]);
    REQUIRE(sync != nullptr);
    CHECK(sync->eps == 1e-3);
    CHECK(*sync->momentum == 0.2);
    CHECK(sync->running_mean.value() == Array({1.0, 2.0, 3.0}));
    CHECK(std::dynamic_pointer_cast<nn::SyncBatchNorm>((*net)[2]) != nullptr);
    CHECK(std::dynamic_pointer_cast<nn::Linear>((*net)[0]) != nullptr);
    CHECK(nn::convert_sync_batchnorm(std::make_shared<nn::BatchNorm1d>(2))->name() == "SyncBatchNorm");
}

// Issue 40, item 1: the converted layer holds the BatchNorm's own tensors (PyTorch's conversion),
// so a float32 model stays float32, a frozen parameter stays frozen and an optimizer made before
// the conversion trains the new layer.
TEST_CASE("convert_sync_batchnorm keeps the BatchNorm's own tensors: dtype, requires_grad, optimizer",
          "[distributed][sync_batchnorm][issue40]") {
    auto bn = std::make_shared<nn::BatchNorm1d>(3);
    auto net = std::make_shared<nn::Sequential>(
        std::initializer_list<std::shared_ptr<nn::Module>>{std::make_shared<nn::Linear>(2, 3), bn});
    net->to(kFloat32);
    bn->bias.requires_grad_(false);
    optim::SGD sgd(net->parameters(), optim::SGDOptions(0.5));
    const Tensor weight_before = bn->weight, mean_before = bn->running_mean;
    nn::convert_sync_batchnorm(net);
    auto sync = std::dynamic_pointer_cast<nn::SyncBatchNorm>((*net)[1]);
    REQUIRE(sync != nullptr);
    CHECK(sync->weight.dtype() == kFloat32);
    CHECK(sync->running_var.dtype() == kFloat32);
    CHECK(!sync->bias.requires_grad());
    CHECK(sync->weight.requires_grad());

    const Tensor x(xg::test::global_randn({4, 2}, 50 + static_cast<std::uint64_t>(distributed::rank())), kFloat32);
    const Tensor y = (*net)(x);
    CHECK(y.dtype() == kFloat32);
    // The state the optimizer and the old handles see is the converted layer's.
    CHECK(mean_before.value() == sync->running_mean.value());
    sum(y * Tensor(xg::test::global_randn({4, 3}, 51), kFloat32)).backward();
    CHECK(weight_before.grad_value() == sync->weight.grad_value());
    const Array weight_values = sync->weight.value();
    sgd.step();
    CHECK(sync->weight.value() != weight_values);
    CHECK(sync->weight.dtype() == kFloat32);
}

// Issue 40, item 2: a SyncBatchNorm of another channel count on some rank stops every rank with
// the counts named (the gathered statistics would otherwise mix unrelated channels), never a hang.
TEST_CASE("SyncBatchNorm with different channel counts on different ranks throws on every rank, naming them",
          "[distributed][sync_batchnorm][errors][issue40]") {
    const int me = distributed::rank();
    const std::size_t C = me == 1 ? 2 : 3;
    nn::SyncBatchNorm sync(static_cast<std::int64_t>(C));
    const Tensor x(xg::test::global_randn({4, C}, 52 + static_cast<std::uint64_t>(me)));
    if (distributed::world_size() == 1) {  // (a job of one has no other count: the 2- and 3-rank runs test this)
        CHECK(sync.forward(x).shape() == Shape{4, 3});
        return;
    }
    CHECK_THROWS_WITH(sync.forward(x), Catch::Contains("SyncBatchNorm") && Catch::Contains("rank 0: 3") &&
                                           Catch::Contains("rank 1: 2") && Catch::Contains("same number of channels"));
    // The job goes on: the ranks are still in step for the next collective.
    nn::SyncBatchNorm same(3);
    CHECK(same.forward(Tensor(xg::test::global_randn({4, 3}, 53))).shape() == Shape{4, 3});
}

// Issue 40, item 4: evaluation without running statistics normalises each rank's rows by their own
// statistics (BatchNormBase::forward, as PyTorch); a rank with no rows (allowed) gets an empty output.
TEST_CASE("SyncBatchNorm in eval without running statistics takes a rank with no rows", "[distributed][sync_batchnorm][issue40]") {
    nn::SyncBatchNorm sync(3, 1e-5, 0.1, true, false);
    sync.eval();
    const std::size_t rows = distributed::rank() == 1 ? 0 : 4;
    const Tensor x(rows == 0 ? Array::from_shape({0, 3}) : xg::test::global_randn({rows, 3}, 54));
    CHECK(sync.forward(x).shape() == Shape{rows, 3});
}

TEST_CASE("SyncBatchNorm names itself and the shapes for a bad input", "[distributed][sync_batchnorm][errors]") {
    nn::SyncBatchNorm sync(3);
    CHECK_THROWS_WITH(sync.forward(Tensor(xt::zeros<double>({std::size_t{4}, std::size_t{2}}))),
                      Catch::Contains("SyncBatchNorm") && Catch::Contains("(N, 3, *)") && Catch::Contains("(4, 2)"));
    CHECK_THROWS_WITH(sync.forward(Tensor(xt::zeros<double>({std::size_t{4}}))), Catch::Contains("(4,)"));
    CHECK_THROWS_WITH(nn::SyncBatchNorm(0), Catch::Contains("SyncBatchNorm") && Catch::Contains("num_features"));
}

// Issue 41, item 1: a float32 SyncBatchNorm updates its running statistics in their float32 storage
// (no float64 mirror), with the float64 update's arithmetic on the same global statistics rounded
// once per stored value. The float64 layer starts every step from the float32 one's statistics,
// widened, so that each step is compared on its own, to the bit.
TEST_CASE("float32 SyncBatchNorm: running statistics without a float64 mirror, the float64 update rounded once",
          "[distributed][sync_batchnorm][float32]") {
    const std::size_t me = static_cast<std::size_t>(distributed::rank());
    for (const bool cumulative : {false, true}) {
        INFO((cumulative ? "cumulative average" : "momentum 0.1"));
        const std::optional<double> momentum = cumulative ? std::nullopt : std::optional<double>(0.1);
        nn::SyncBatchNorm sync64(3, 1e-5, momentum), sync32(3, 1e-5, momentum);
        sync32.to(kFloat32);
        for (std::uint64_t step = 0; step < 3; ++step) {
            INFO("step " << step);
            sync64.running_mean.mutable_value() = to_float64_array(sync32.running_mean.values<float>());
            sync64.running_var.mutable_value() = to_float64_array(sync32.running_var.values<float>());
            const Tensor x(xg::test::global_randn({4, 3}, 80 + 10 * step + me, 2.0, 1.0), kFloat32);
            sync64.forward(x.to(kFloat64));
            sync32.forward(x);
            for (const auto& [t32, t64] : {std::pair{sync32.running_mean, sync64.running_mean},
                                           std::pair{sync32.running_var, sync64.running_var}}) {
                CHECK(t32.dtype() == kFloat32);
                CHECK((t32.node()->value_mirror == Node::Mirror::None && t32.node()->grad_mirror == Node::Mirror::None));
                CHECK(max_diff_all_ranks(to_float64_array(t32.values<float>()), to_float64_array(to_float32_array(t64.value()))) == 0.0);
            }
        }
    }
}

namespace {

// How many values of this rank's a and b differ in their bits (all of them when the shapes differ),
// summed over every rank: every rank gets the same count, so a CHECK on it leaves no rank behind.
double differing_bits_all_ranks(const FloatArray& a, const FloatArray& b) {
    double local = 0.0;
    if (a.shape() != b.shape()) {
        local = static_cast<double>(std::max<std::size_t>(a.size() + b.size(), 1));
    } else {
        for (std::size_t i = 0; i < a.size(); ++i) local += std::memcmp(a.data() + i, b.data() + i, sizeof(float)) != 0 ? 1.0 : 0.0;
    }
    Array total = Array({local});
    distributed::all_reduce(total);
    return total(0);
}

// The summed count over every rank of the local falsehoods among `conditions`.
double failures_all_ranks(std::initializer_list<bool> conditions) {
    double local = 0.0;
    for (const bool ok : conditions) local += ok ? 0.0 : 1.0;
    Array total = Array({local});
    distributed::all_reduce(total);
    return total(0);
}

bool no_mirror(const Tensor& t) {
    return t.node()->value_mirror == Node::Mirror::None && t.node()->grad_mirror == Node::Mirror::None;
}

// One training step of a SyncBatchNorm on this rank's rows x and seed g (values on the float32 grid)
// in `dtype`: its output, the gradients of x, weight and bias rounded to float32 (exact for a
// float32 run), and whether it was a native float32 node with no float64 mirror anywhere.
struct SyncStep {
    FloatArray y, dx, dw, db;
    bool native_without_mirror = true;
};

SyncStep sync_step(Dtype dtype, const Array& x_values, const Array& g_values, const Array& w_values, const Array& b_values,
                   bool affine) {
    const std::size_t C = w_values.size();
    nn::SyncBatchNorm sync(static_cast<std::int64_t>(C), 1e-5, 0.1, affine);
    sync.to(dtype);
    Tensor x(x_values, dtype, true), w(w_values, dtype, true), b(b_values, dtype, true);
    if (affine) {
        sync.replace_parameter("weight", w);
        sync.replace_parameter("bias", b);
    }
    const Tensor g(g_values, dtype);
    const Tensor y = sync.forward(x);
    y.backward(g);
    const auto as_float32 = [dtype](const Tensor& t, bool grad) {
        if (dtype == kFloat32) return grad ? t.grad_values<float>() : t.values<float>();
        return to_float32_array(grad ? t.grad_value() : t.value());
    };
    SyncStep step{as_float32(y, false), as_float32(x, true), {}, {}};
    if (affine) {
        step.dw = as_float32(sync.weight, true);
        step.db = as_float32(sync.bias, true);
    }
    if (dtype == kFloat32) {
        step.native_without_mirror = y.dtype() == kFloat32 && y.node()->native && no_mirror(x) && no_mirror(y) && no_mirror(g) &&
                                     (!affine || (no_mirror(sync.weight) && no_mirror(sync.bias)));
    }
    return step;
}

}  // namespace

// Issue 41, item 1: a float32 SyncBatchNorm (x, weight and bias float32) is a native float32 node:
// BatchNorm's kernels read and write the float32 storage, so x, weight, bias, y and the seed get no
// float64 mirror, forward or backward. The bound: none, bit for bit on both tiers, with 1, 2 and 3
// ranks. The kernels widen every float32 value they read and run the double kernels' arithmetic in
// the same order (the fast tier's too: tests/batch_norm/test_batch_norm_float32.cpp); each rank's
// statistics and backward sums are double whatever the storage, gathered, merged and all-reduced in
// double as in the float64 route; y and dx are rounded once at their store, dw and db (this rank's
// part) once at the end. So the float32 results are the float64 route's on the same values rounded
// once. Unequal counts and a rank with no rows too.
TEST_CASE("float32 SyncBatchNorm is a native float32 node: no float64 mirror, the float64 route's bits on both tiers",
          "[distributed][sync_batchnorm][float32]") {
    const int world = distributed::world_size(), me = distributed::rank();
    for (const Case& c : {Case{{4}, true, false}, Case{{4}, false, false}, Case{{3, 5}, false, false},
                          Case{{2, 3, 2}, true, false}, Case{{4}, false, true}}) {
        const auto [begin, end, global_shape] = xg::test::rank_rows(world, me, 5, c.equal, c.empty_rank, c.trailing);
        const std::size_t C = c.trailing[0];
        // every value on the float32 grid, so that both routes start from the same numbers
        const auto on_float32_grid = [](const Array& a) { return to_float64_array(to_float32_array(a)); };
        const Array X = on_float32_grid(xg::test::rows(xg::test::global_randn(global_shape, 90, 3.0, 2.0), begin, end));
        const Array G = on_float32_grid(xg::test::rows(xg::test::global_randn(global_shape, 91), begin, end));
        const Array W = on_float32_grid(xg::test::global_randn({C}, 92, 0.5, 1.0)), B = on_float32_grid(xg::test::global_randn({C}, 93));
        for (const KernelTier tier : {KernelTier::reference, KernelTier::fast}) {
            for (const bool affine : {true, false}) {
                INFO(describe(c) << ", " << world << " ranks, " << (tier == KernelTier::reference ? "reference" : "fast") << " tier"
                                 << (affine ? ", affine" : ", no affine"));
                const KernelTierGuard guard(tier);
                const SyncStep f32 = sync_step(kFloat32, X, G, W, B, affine);
                const SyncStep f64 = sync_step(kFloat64, X, G, W, B, affine);
                CHECK(failures_all_ranks({f32.native_without_mirror}) == 0.0);
                CHECK(differing_bits_all_ranks(f32.y, f64.y) == 0.0);
                CHECK(differing_bits_all_ranks(f32.dx, f64.dx) == 0.0);
                if (affine) {
                    CHECK(differing_bits_all_ranks(f32.dw, f64.dw) == 0.0);
                    CHECK(differing_bits_all_ranks(f32.db, f64.db) == 0.0);
                }
            }
        }
    }
}

}  // namespace xg_test_sync_batchnorm
