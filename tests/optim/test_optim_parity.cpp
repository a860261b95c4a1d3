// Optimizers and schedules added for PyTorch parity (issue 13): LinearLR, LambdaLR, StepLR,
// MultiStepLR, CosineAnnealingLR against PyTorch's classes, their arguments and state_dict, Adam
// and AdamW amsgrad, SGD maximize.
#include <cmath>
#include <functional>
#include <memory>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "nn/functional/losses.hpp"
#include "optim/optim.hpp"
#include "tests/support/fixtures.hpp"

namespace xg_test_optim_parity {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;

using Catch::Matchers::Contains;

using test::fixture;

using test::max_rel_diff;

namespace {

// The fixture's loop: two groups (lr 0.5 and 0.1); record both lrs, then opt.step(); sched.step().
template <class Make>
void check_schedule(const std::string& name, Make make, double tolerance) {
    Tensor a = zeros({1}, true), b = zeros({1}, true);
    optim::SGD opt({optim::ParamGroupSpec{{a}, 0.5, {}}, optim::ParamGroupSpec{{b}, 0.1, {}}}, optim::SGDOptions(1.0));
    auto sched = make(opt);
    const Array expected = fixture(name, "lr");
    Array got = Array::from_shape(expected.shape());
    for (std::size_t step = 0; step < expected.shape()[0]; ++step) {
        for (std::size_t g = 0; g < 2; ++g) got(step, g) = opt.param_groups()[g].lr;
        CHECK(sched.lr() == got(step, 0));
        opt.step();
        sched.step();
    }
    const double err = max_rel_diff(got, expected);
    fmt::print("schedule {:24s} max rel error {:.3g}\n", name, err);
    INFO(name);
    CHECK(err < tolerance);
}

// 5 x (zero_grad; loss(w) = 0.5 * sum(A * (w - c)^2); backward; step), as tests/optim/test_optim.cpp.
Array trajectory(const std::string& name, optim::Optimizer& opt, Tensor& w) {
    const Tensor A(fixture(name, "A")), c(fixture(name, "c"));
    Array out = xt::zeros<double>({6, 3});
    for (std::size_t j = 0; j < 3; ++j) out(0, j) = w(j);
    for (std::size_t k = 1; k <= 5; ++k) {
        opt.zero_grad();
        Tensor diff = w - c;
        (0.5 * sum(A * diff * diff)).backward();
        opt.step();
        for (std::size_t j = 0; j < 3; ++j) out(k, j) = w(j);
    }
    return out;
}

template <class Opt, class Options>
void check_trajectory(const std::string& name, const Options& options) {
    Tensor w(Array{2.0, 1.0, -1.0}, true);
    Opt opt({w}, options);
    const double err = max_rel_diff(trajectory(name, opt, w), fixture(name, "trajectory"));
    fmt::print("optimizer trajectory {:14s} max rel error {:.3g}\n", name, err);
    INFO(name);
    CHECK(err < 1e-12);
}

}  // namespace

TEST_CASE("LinearLR, LambdaLR, StepLR, MultiStepLR, CosineAnnealingLR match PyTorch's classes", "[parity][schedule]") {
    using namespace xg::optim;
    // PyTorch's LambdaLR, StepLR and MultiStepLR compute what xgrad computes, so they agree to the
    // last bit or nearly; LinearLR and CosineAnnealingLR update lr recursively in PyTorch (each
    // step multiplies the previous lr by a ratio), and rounding accumulates over the 30 steps.
    check_schedule("sched_lambda_lr", [](Optimizer& o) { return LambdaLR(o, [](std::int64_t s) { return std::pow(0.95, s); }); },
                   1e-15);
    check_schedule("sched_step_lr", [](Optimizer& o) { return StepLR(o, 7, 0.5); }, 1e-15);
    check_schedule("sched_multistep_lr", [](Optimizer& o) { return MultiStepLR(o, {10, 3, 20, 10}, 0.3); }, 1e-15);
    check_schedule("sched_linear_lr", [](Optimizer& o) { return LinearLR(o, 0.25, 1.0, 8); }, 1e-14);
    check_schedule("sched_linear_lr_down", [](Optimizer& o) { return LinearLR(o, 1.0, 0.1, 20); }, 1e-14);
    check_schedule("sched_cosine_annealing", [](Optimizer& o) { return CosineAnnealingLR(o, 12, 0.01); }, 1e-14);
}

TEST_CASE("the new schedules check their arguments and restore from state_dict", "[parity][schedule]") {
    using namespace xg::optim;
    Tensor w = zeros({1}, true);
    SGD opt({w}, SGDOptions(0.2));
    CHECK_THROWS_WITH(LambdaLR(opt, nullptr), Contains("LambdaLR") && Contains("empty"));
    CHECK_THROWS_WITH(LambdaLR(opt, [](std::int64_t) { return -1.0; }), Contains("lr_lambda(0) returned -1"));
    CHECK_THROWS_WITH(LinearLR(opt, 0.0), Contains("LinearLR") && Contains("start_factor"));
    CHECK_THROWS_WITH(LinearLR(opt, 0.5, 1.5), Contains("end_factor"));
    CHECK_THROWS_WITH(LinearLR(opt, 0.5, 1.0, 0), Contains("total_iters"));
    CHECK_THROWS_WITH(StepLR(opt, 0), Contains("StepLR") && Contains("step_size"));
    CHECK_THROWS_WITH(StepLR(opt, 3, -0.1), Contains("gamma"));
    CHECK_THROWS_WITH(MultiStepLR(opt, {2, -1}), Contains("MultiStepLR") && Contains("-1"));
    CHECK_THROWS_WITH(CosineAnnealingLR(opt, 0), Contains("CosineAnnealingLR") && Contains("T_max"));
    CHECK_THROWS_WITH(CosineAnnealingLR(opt, 10, -1.0), Contains("eta_min"));

    CosineAnnealingLR cosine(opt, 10, 0.02);
    for (int i = 0; i < 4; ++i) cosine.step();
    const double lr_after_4 = cosine.lr();
    const auto state = cosine.state_dict();
    // Restored as after a restart: a fresh optimizer and schedule, the optimizer's state (which
    // holds the lr) and the schedule's step count. A second schedule on `opt` itself would chain.
    SGD restored({w}, SGDOptions(0.2));
    CosineAnnealingLR fresh(restored, 10, 0.02);
    CHECK(fresh.lr() == 0.2);
    restored.load_state_dict(opt.state_dict());
    fresh.load_state_dict(state);
    CHECK(fresh.lr() == lr_after_4);
    CHECK(fresh.last_step() == 4);
    CHECK(fresh.factor(10) == 0.0);  // lr reaches eta_min at T_max
    MultiStepLR steps(opt, {2, 2}, 0.5);
    CHECK(steps.factor(1) == 1.0);
    CHECK(steps.factor(2) == 0.25);  // a milestone listed twice counts twice, as in PyTorch
}

TEST_CASE("Adam and AdamW amsgrad, SGD maximize match PyTorch", "[parity][optim]") {
    using namespace xg::optim;
    check_trajectory<Adam>("adam_amsgrad", AdamOptions(0.1).betas(0.9, 0.5).amsgrad(true));
    check_trajectory<AdamW>("adamw_amsgrad", AdamWOptions(0.1).betas(0.9, 0.5).weight_decay(0.1).amsgrad(true));
    check_trajectory<SGD>("sgd_maximize", SGDOptions(0.1).momentum(0.9).weight_decay(0.01).maximize(true));

    // amsgrad keeps one more buffer, which the state_dict saves and restores.
    Tensor w(Array{2.0, 1.0, -1.0}, true);
    Adam adam({w}, AdamOptions(0.1).betas(0.9, 0.5).amsgrad(true));
    CHECK(adam.buffer_names() == std::vector<std::string>{"exp_avg", "exp_avg_sq", "max_exp_avg_sq"});
    trajectory("adam_amsgrad", adam, w);
    const NamedArrays state = adam.state_dict();
    Tensor w2(w.value(), true);
    Adam resumed({w2}, AdamOptions(0.1).betas(0.9, 0.5).amsgrad(true));
    resumed.load_state_dict(state);
    CHECK((resumed.state_dict() == state));
    Adam plain({w2}, AdamOptions(0.1));
    CHECK_THROWS_WITH(plain.load_state_dict(state), Contains("max_exp_avg_sq"));
}

}  // namespace xg_test_optim_parity
