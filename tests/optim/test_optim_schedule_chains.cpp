// Schedules on one optimizer compose as PyTorch's chainable schedulers do (issue 27, item 1):
// chains of torch.optim.lr_scheduler classes against PyTorch (tests/fixtures/sched_chains,
// sched_chain_issue27), step(epoch) against PyTorch's closed forms (sched_closed_form), the
// warm-up schedules (no PyTorch class) multiplied into a chain, and a chain's exact resumption
// (by hand and through Checkpoint).
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "nn/modules/layers.hpp"
#include "optim/schedule.hpp"
#include "optim/sgd.hpp"
#include "optim/training/checkpoint.hpp"
#include "tests/support/fixtures.hpp"

namespace xg_test_optim_schedule_chains {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using namespace xg::optim;
using Catch::Matchers::Contains;
using Chain = std::vector<std::unique_ptr<LRScheduler>>;
using MakeChain = std::function<Chain(Optimizer&)>;

namespace {

// SGD with the fixtures' two groups, lr 0.5 and 0.1.
std::unique_ptr<SGD> two_groups() {
    static Tensor a = zeros({1}, true), b = zeros({1}, true);
    return std::make_unique<SGD>(std::vector<ParamGroupSpec>{ParamGroupSpec{{a}, 0.5, {}}, ParamGroupSpec{{b}, 0.1, {}}},
                                 SGDOptions(1.0));
}

// The fixtures' loop: record every group's lr, then opt.step() and each scheduler's step() in
// construction order. Returns (steps, groups).
Array run_chain(Optimizer& opt, Chain& chain, std::size_t steps) {
    const std::size_t groups = opt.param_groups().size();
    Array lrs = Array::from_shape({steps, groups});
    for (std::size_t s = 0; s < steps; ++s) {
        for (std::size_t g = 0; g < groups; ++g) lrs(s, g) = opt.param_groups()[g].lr;
        opt.step();
        for (auto& sched : chain) sched->step();
    }
    return lrs;
}

template <class... Scheds>
Chain chain_of(std::unique_ptr<Scheds>... scheds) {
    Chain chain;
    (chain.push_back(std::move(scheds)), ...);
    return chain;
}

}  // namespace

TEST_CASE("two schedules on one optimizer compose multiplicatively, as in PyTorch", "[schedule][issue27]") {
    // The example: LinearLR's warm-up survives StepLR's decay (xgrad gave 1, 1, 1, 0.5, ...).
    Tensor w = zeros({1}, true);
    SGD opt({w}, SGDOptions(1.0));
    Chain chain = chain_of(std::make_unique<LinearLR>(opt, 0.25, 1.0, 4), std::make_unique<StepLR>(opt, 3, 0.5));
    const Array got = run_chain(opt, chain, 8);
    const Array want = test::fixture("sched_chain_issue27", "lr");
    for (std::size_t s = 0; s < 8; ++s) {
        INFO("step " << s);
        CHECK(got(s, 0) == want(s));  // sums of powers of two: exact
    }
}

TEST_CASE("chains of LinearLR, StepLR, MultiStepLR, ConstantLR, CosineAnnealingLR, LambdaLR match PyTorch",
          "[schedule][issue27]") {
    const std::vector<std::pair<std::string, MakeChain>> chains = {
        {"linear_step", [](Optimizer& o) { return chain_of(std::make_unique<LinearLR>(o, 0.25, 1.0, 8), std::make_unique<StepLR>(o, 7, 0.5)); }},
        {"multistep_cosine", [](Optimizer& o) {
             return chain_of(std::make_unique<MultiStepLR>(o, std::vector<std::int64_t>{5, 12, 12}, 0.5),
                             std::make_unique<CosineAnnealingLR>(o, 10, 0.01));
         }},
        {"cosine_multistep", [](Optimizer& o) {
             return chain_of(std::make_unique<CosineAnnealingLR>(o, 10, 0.01),
                             std::make_unique<MultiStepLR>(o, std::vector<std::int64_t>{5, 12, 12}, 0.5));
         }},
        {"constant_linear_step", [](Optimizer& o) {
             return chain_of(std::make_unique<ConstantLR>(o, 0.5, 4), std::make_unique<LinearLR>(o, 1.0, 0.2, 12),
                             std::make_unique<StepLR>(o, 10, 0.3));
         }},
        // LambdaLR is not chainable in PyTorch: it sets initial_lr * lambda(step) each step, so
        // StepLR's decay after it lasts one step, and before it none.
        {"lambda_step", [](Optimizer& o) {
             return chain_of(std::make_unique<LambdaLR>(o, [](std::int64_t s) { return std::pow(0.95, static_cast<double>(s)); }),
                             std::make_unique<StepLR>(o, 7, 0.5));
         }},
        {"step_lambda", [](Optimizer& o) {
             return chain_of(std::make_unique<StepLR>(o, 7, 0.5),
                             std::make_unique<LambdaLR>(o, [](std::int64_t s) { return std::pow(0.95, static_cast<double>(s)); }));
         }},
    };
    for (const auto& [name, make] : chains) {
        auto opt = two_groups();
        Chain chain = make(*opt);
        const Array want = test::fixture("sched_chains", "lr_" + name);
        const double err = test::max_rel_diff(run_chain(*opt, chain, want.shape()[0]), want);
        fmt::print("schedule chain {:22s} max rel error {:.3g}\n", name, err);
        INFO(name);
        CHECK(err <= 1e-15);  // the same operations as PyTorch's get_lr, in the same order
    }
}

TEST_CASE("step(epoch) sets PyTorch's closed form from initial_lr", "[schedule][issue27]") {
    const std::vector<std::int64_t> epochs = {3, 0, 7, 8, 20, 13, 40, 5};
    const std::vector<std::pair<std::string, std::function<std::unique_ptr<LRScheduler>(Optimizer&)>>> scheds = {
        {"constant", [](Optimizer& o) { return std::make_unique<ConstantLR>(o, 0.5, 4); }},
        {"linear", [](Optimizer& o) { return std::make_unique<LinearLR>(o, 0.25, 1.0, 8); }},
        {"step", [](Optimizer& o) { return std::make_unique<StepLR>(o, 7, 0.5); }},
        {"multistep", [](Optimizer& o) { return std::make_unique<MultiStepLR>(o, std::vector<std::int64_t>{10, 3, 20, 10}, 0.3); }},
        {"cosine", [](Optimizer& o) { return std::make_unique<CosineAnnealingLR>(o, 12, 0.01); }},
        {"lambda", [](Optimizer& o) { return std::make_unique<LambdaLR>(o, [](std::int64_t s) { return std::pow(0.95, static_cast<double>(s)); }); }},
    };
    for (const auto& [name, make] : scheds) {
        auto opt = two_groups();
        auto sched = make(*opt);
        const Array want = test::fixture("sched_closed_form", "lr_" + name);
        Array got = Array::from_shape(want.shape());
        for (std::size_t k = 0; k < epochs.size(); ++k) {
            opt->step();
            sched->step(epochs[k]);
            CHECK(sched->last_step() == epochs[k]);
            for (std::size_t g = 0; g < 2; ++g) got(k, g) = opt->param_groups()[g].lr;
        }
        const double err = test::max_rel_diff(got, want);
        fmt::print("schedule step(epoch) {:10s} max rel error {:.3g}\n", name, err);
        INFO(name);
        CHECK(err <= 1e-15);
    }
    auto opt = two_groups();
    StepLR step(*opt, 7, 0.5);
    CHECK_THROWS_WITH(step.step(-1), Contains("LRScheduler.step") && Contains("-1"));
}

TEST_CASE("the warm-up schedules multiply into a chain like PyTorch's chainable ones", "[schedule][issue27]") {
    // No PyTorch class to compare with: in a chain with StepLR (either order), each group's lr must
    // be the warm-up's lr alone times StepLR's factor. Tolerance: 30 steps of at most three
    // roundings each (divide, multiply, StepLR's gamma), 30 * 3 * 2^-53 < 1e-14.
    const std::vector<std::pair<std::string, std::function<std::unique_ptr<LRScheduler>(Optimizer&)>>> warmups = {
        {"LinearWarmup", [](Optimizer& o) { return std::make_unique<LinearWarmup>(o, 5); }},
        {"WarmupCosine", [](Optimizer& o) { return std::make_unique<WarmupCosine>(o, 3, 20, 0.1); }},
        {"WarmupCosine to 0", [](Optimizer& o) { return std::make_unique<WarmupCosine>(o, 2, 12, 0.0); }},
        {"InverseSqrtWarmup", [](Optimizer& o) { return std::make_unique<InverseSqrtWarmup>(o, 16, 4); }},
    };
    for (const auto& [name, make] : warmups) {
        for (bool warmup_first : {true, false}) {
            auto alone_opt = two_groups();
            Chain alone = chain_of(make(*alone_opt));
            const Array warm = run_chain(*alone_opt, alone, 30);
            auto opt = two_groups();
            Chain chain;
            if (warmup_first) chain.push_back(make(*opt));
            chain.push_back(std::make_unique<StepLR>(*opt, 7, 0.5));
            if (!warmup_first) chain.push_back(make(*opt));
            const Array got = run_chain(*opt, chain, 30);
            Array want = Array::from_shape(got.shape());
            for (std::size_t s = 0; s < 30; ++s) {
                for (std::size_t g = 0; g < 2; ++g) want(s, g) = warm(s, g) * std::pow(0.5, static_cast<double>(s / 7));
            }
            double err = 0.0;  // relative, and exact where the warm-up reaches 0
            for (std::size_t i = 0; i < got.size(); ++i) {
                REQUIRE(std::isfinite(got.data()[i]));
                err = std::max(err, want.data()[i] == 0.0 ? std::fabs(got.data()[i]) : std::fabs(got.data()[i] / want.data()[i] - 1.0));
            }
            INFO(name << (warmup_first ? ", then StepLR" : ", after StepLR"));
            CHECK(err < 1e-14);
        }
    }
}

TEST_CASE("a warm-up schedule alone still gives initial_lr * factor(step) to the bit", "[schedule][issue27]") {
    // The chained update divides by the previous factor only once another schedule has scaled the
    // lr; dividing always would leave e.g. LinearWarmup(5) from lr 0.1 at 0.09999999999999999.
    const std::vector<std::function<std::unique_ptr<LRScheduler>(Optimizer&)>> warmups = {
        [](Optimizer& o) { return std::make_unique<LinearWarmup>(o, 5); },
        [](Optimizer& o) { return std::make_unique<WarmupCosine>(o, 4, 25, 0.1); },
        [](Optimizer& o) { return std::make_unique<InverseSqrtWarmup>(o, 16, 6); },
    };
    for (double lr : {0.1, 0.003, 0.03}) {
        for (std::size_t k = 0; k < warmups.size(); ++k) {
            Tensor w = zeros({1}, true);
            SGD opt({w}, SGDOptions(lr));
            Chain alone = chain_of(warmups[k](opt));
            const Array got = run_chain(opt, alone, 30);
            for (std::size_t s = 0; s < 30; ++s) {
                INFO("warm-up " << k << ", lr " << lr << ", step " << s);
                CHECK(got(s, 0) == lr * alone[0]->factor(static_cast<std::int64_t>(s)));
            }
        }
    }
}

TEST_CASE("a restored chain continues exactly where it was saved", "[schedule][issue27]") {
    const MakeChain make = [](Optimizer& o) {
        return chain_of(std::make_unique<LinearWarmup>(o, 6), std::make_unique<MultiStepLR>(o, std::vector<std::int64_t>{4, 9}, 0.5),
                        std::make_unique<CosineAnnealingLR>(o, 15, 0.001));
    };
    auto straight_opt = two_groups();
    Chain straight_chain = make(*straight_opt);
    const Array straight = run_chain(*straight_opt, straight_chain, 20);

    auto first_opt = two_groups();
    Chain first = make(*first_opt);
    const Array head = run_chain(*first_opt, first, 7);
    auto resumed_opt = two_groups();
    Chain resumed = make(*resumed_opt);  // fresh objects, as after a restart
    resumed_opt->load_state_dict(first_opt->state_dict());
    for (std::size_t i = 0; i < resumed.size(); ++i) resumed[i]->load_state_dict(first[i]->state_dict());
    CHECK(resumed[2]->last_step() == 7);
    const Array tail = run_chain(*resumed_opt, resumed, 13);
    for (std::size_t s = 0; s < 20; ++s) {
        for (std::size_t g = 0; g < 2; ++g) {
            INFO("step " << s << ", group " << g);
            CHECK(straight(s, g) == (s < 7 ? head(s, g) : tail(s - 7, g)));
        }
    }
}

TEST_CASE("Checkpoint saves and restores every scheduler of a chain", "[schedule][issue27][checkpoint]") {
    struct Run {
        nn::Linear model{2, 2};
        SGD opt{model.parameters(), SGDOptions(0.1)};
        LinearLR warm{opt, 0.25, 1.0, 6};
        StepLR decay{opt, 4, 0.5};
        Checkpoint checkpoint{model, opt, std::vector<LRScheduler*>{&warm, &decay}};
        void step() {
            opt.step();
            warm.step();
            decay.step();
        }
    };
    Run straight, first, resumed;
    for (int i = 0; i < 5; ++i) straight.step(), first.step();
    const NamedArrays state = first.checkpoint.collect({5, 0});
    bool has_both = false;
    for (const auto& entry : state) has_both = has_both || entry.first == "sched.1.last_step";
    CHECK(has_both);
    resumed.checkpoint.restore(state);
    CHECK(resumed.decay.last_step() == 5);
    for (int i = 0; i < 8; ++i) {
        INFO("step " << 5 + i);
        CHECK(resumed.opt.param_groups()[0].lr == straight.opt.param_groups()[0].lr);
        straight.step();
        resumed.step();
    }
    // A checkpoint of one scheduler does not fit a chain of two, and the other way round.
    nn::Linear model(2, 2);
    SGD opt(model.parameters(), SGDOptions(0.1));
    StepLR only(opt, 4, 0.5);
    Checkpoint single(model, opt, &only);
    CHECK_THROWS_WITH(first.checkpoint.validate(single.collect({0, 0})), Contains("sched.last_step") && Contains("chain of 2"));
    CHECK_THROWS_WITH(single.validate(state), Contains("last_step"));
    CHECK_THROWS_WITH(Checkpoint(model, opt, std::vector<LRScheduler*>{&only, nullptr}), Contains("scheduler 1 of 2 is null"));
}

TEST_CASE("ConstantLR takes a factor in [0, 1], as PyTorch's", "[schedule][issue27]") {
    auto opt = two_groups();
    CHECK_THROWS_WITH(ConstantLR(*opt, 1.5, 3), Contains("ConstantLR") && Contains("[0, 1]") && Contains("1.5"));
    CHECK_THROWS_WITH(ConstantLR(*opt, -0.5, 3), Contains("ConstantLR") && Contains("-0.5"));
    // A factor of 0 could never be undone by the chainable update (PyTorch divides by zero).
    CHECK_THROWS_WITH(ConstantLR(*opt, 0.0, 3), Contains("ConstantLR") && Contains("factor 0"));
    CHECK(opt->param_groups()[0].lr == 0.5);  // a refused schedule changes nothing
    ConstantLR none(*opt, 0.0, 0);            // total_iters 0: the factor never applies
    CHECK(opt->param_groups()[0].lr == 0.5);
    ConstantLR full(*opt, 1.0, 2);
    CHECK(opt->param_groups()[0].lr == 0.5);
}

}  // namespace xg_test_optim_schedule_chains
