// Learning-rate schedules against PyTorch's LambdaLR (tests/fixtures/sched_*).
#include <cstdio>

#include <fmt/format.h>

#include "optim/schedule.hpp"
#include "optim/sgd.hpp"
#include "tests/support/fixtures.hpp"

namespace xg_test_optim_schedule {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;

namespace {

// The fixture's loop: record lr, then opt.step(); sched.step() - for 30 steps, base lr 1.
template <class Make>
void check_schedule(const std::string& name, Make make) {
    Tensor w = zeros({1}, true);
    optim::SGD opt({w}, optim::SGDOptions(1.0));
    auto sched = make(opt);
    const Array expected = xg::test::fixture(name, "lr");
    Array got = Array::from_shape({expected.size()});
    for (std::size_t step = 0; step < expected.size(); ++step) {
        got(step) = opt.param_groups()[0].lr;
        CHECK(sched.lr() == got(step));
        opt.step();
        sched.step();
    }
    const double err = xg::test::max_rel_diff(got, expected);
    fmt::print("schedule {:20s} max rel error {:.3g}\n", name, err);
    CHECK(err < 1e-15);
}

}  // namespace

TEST_CASE("schedules match PyTorch LambdaLR", "[schedule]") {
    check_schedule("sched_warmup_linear", [](optim::Optimizer& o) { return optim::LinearWarmup(o, 10); });
    check_schedule("sched_warmup_cosine", [](optim::Optimizer& o) { return optim::WarmupCosine(o, 5, 30); });
    check_schedule("sched_inverse_sqrt", [](optim::Optimizer& o) { return optim::InverseSqrtWarmup(o, 128, 10); });
}

TEST_CASE("schedules scale every group from its own initial lr", "[schedule]") {
    Tensor a = zeros({1}, true), b = zeros({1}, true);
    optim::SGD opt({optim::ParamGroupSpec{{a}, 0.5, {}}, optim::ParamGroupSpec{{b}, 0.1, {}}}, optim::SGDOptions(1.0));
    optim::WarmupCosine sched(opt, 2, 10, 0.1);
    CHECK(opt.param_groups()[0].lr == 0.5 * 0.5);
    CHECK(opt.param_groups()[1].lr == 0.1 * 0.5);
    for (int i = 0; i < 20; ++i) sched.step();
    CHECK(sched.factor(sched.last_step()) == Approx(0.1));  // floor after total_steps
    CHECK(opt.param_groups()[1].lr == Approx(0.01));
}

TEST_CASE("ConstantLR and scheduler state", "[schedule]") {
    Tensor a = zeros({1}, true);
    optim::SGD opt({a}, optim::SGDOptions(0.2));
    optim::ConstantLR constant(opt, 0.5, 2);
    CHECK(constant.lr() == 0.1);
    constant.step();
    constant.step();
    CHECK(constant.lr() == 0.2);

    // The lr is the optimizer's state, as in PyTorch; the schedule restores its step count. (A
    // second schedule on the same optimizer would compose with the first, so the restore goes to
    // a fresh optimizer, as after a restart.)
    optim::LinearWarmup warm(opt, 10);
    for (int i = 0; i < 3; ++i) warm.step();
    CHECK(opt.param_groups()[0].lr == 0.2 * 0.4);
    const auto state = warm.state_dict();
    optim::SGD restored({a}, optim::SGDOptions(0.2));
    optim::LinearWarmup fresh(restored, 10);
    restored.load_state_dict(opt.state_dict());
    fresh.load_state_dict(state);
    CHECK(fresh.last_step() == 3);
    CHECK(restored.param_groups()[0].lr == opt.param_groups()[0].lr);
    warm.step();
    fresh.step();
    CHECK(restored.param_groups()[0].lr == opt.param_groups()[0].lr);
    CHECK_THROWS_WITH(fresh.load_state_dict({{"last_step", Array{-1.0}}}), Catch::Contains("last_step"));
    CHECK_THROWS_WITH(optim::WarmupCosine(opt, 10, 5), Catch::Contains("warmup_steps"));
    CHECK_THROWS_WITH(optim::LinearWarmup(opt, 0), Catch::Contains("warmup_steps must be positive"));
}

}  // namespace xg_test_optim_schedule
