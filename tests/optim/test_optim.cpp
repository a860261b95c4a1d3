// Optimizer trajectories against PyTorch (tests/fixtures/{sgd_*,adam*}/), plus the optimizer's
// bookkeeping: groups, skipped parameters, state_dict round trips and validation.
#include <cstdio>
#include <functional>
#include <memory>

#include <fmt/format.h>

#include "optim/adam.hpp"
#include "optim/sgd.hpp"
#include "tests/support/fixtures.hpp"

namespace xg_test_optim {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using xg::test::fixture;
using xg::test::max_rel_diff;

namespace {

using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

// The fixture's loop: 5 x (zero_grad; loss(w) = 0.5 * sum(A * (w - c)^2); backward; step).
Array trajectory(const std::string& name, const MakeOptimizer& make) {
    const Tensor A(fixture(name, "A")), c(fixture(name, "c"));
    Tensor w(Array{2.0, 1.0, -1.0}, true);
    auto opt = make({w});
    Array out = xt::zeros<double>({6, 3});
    for (std::size_t j = 0; j < 3; ++j) out(0, j) = w(j);
    for (std::size_t k = 1; k <= 5; ++k) {
        opt->zero_grad();
        Tensor diff = w - c;
        Tensor loss = 0.5 * sum(A * diff * diff);
        loss.backward();
        opt->step();
        for (std::size_t j = 0; j < 3; ++j) out(k, j) = w(j);
    }
    return out;
}

void check_trajectory(const std::string& name, const MakeOptimizer& make) {
    const Array expected = fixture(name, "trajectory");
    const double err = max_rel_diff(trajectory(name, make), expected);
    fmt::print("optimizer trajectory {:14s} max rel error {:.3g}\n", name, err);
    CHECK(err < 1e-12);
}

}  // namespace

TEST_CASE("optimizer trajectories match PyTorch", "[optim]") {
    using namespace xg::optim;
    check_trajectory("sgd_plain", [](auto p) { return std::make_unique<SGD>(p, SGDOptions(0.1)); });
    check_trajectory("sgd_momentum", [](auto p) { return std::make_unique<SGD>(p, SGDOptions(0.1).momentum(0.9)); });
    check_trajectory("sgd_nesterov", [](auto p) {
        return std::make_unique<SGD>(p, SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(0.01));
    });
    check_trajectory("sgd_dampening",
                     [](auto p) { return std::make_unique<SGD>(p, SGDOptions(0.1).momentum(0.9).dampening(0.5)); });
    check_trajectory("adam", [](auto p) { return std::make_unique<Adam>(p, AdamOptions(0.1)); });
    check_trajectory("adam_wd", [](auto p) { return std::make_unique<Adam>(p, AdamOptions(0.1).weight_decay(0.1)); });
    check_trajectory("adamw", [](auto p) { return std::make_unique<AdamW>(p, AdamWOptions(0.1).weight_decay(0.1)); });
}

TEST_CASE("AdamW defaults follow PyTorch", "[optim]") {
    Tensor w(Array{1.0}, true);
    optim::AdamW opt({w});
    CHECK(opt.param_groups()[0].weight_decay == 1e-2);
    CHECK(opt.param_groups()[0].lr == 1e-3);
    CHECK(opt.name() == "AdamW");
}

TEST_CASE("parameters without a gradient are skipped and keep no state", "[optim]") {
    Tensor a(Array{1.0, 2.0}, true), b(Array{3.0}, true);
    optim::Adam opt({a, b}, optim::AdamOptions(0.1));
    sum(a * a).backward();
    opt.step();
    CHECK(b(0) == 3.0);
    CHECK(a(0) != 1.0);
    const auto state = opt.state_dict();
    bool has_a = false, has_b = false;
    for (const auto& [key, value] : state) {
        has_a = has_a || key == "state.0.exp_avg";
        has_b = has_b || key.rfind("state.1.", 0) == 0;
    }
    CHECK(has_a);
    CHECK_FALSE(has_b);
    opt.zero_grad();
    CHECK_FALSE(a.has_grad());
}

TEST_CASE("parameter groups have their own lr and weight decay", "[optim]") {
    Tensor a(Array{1.0}, true), b(Array{1.0}, true);
    optim::SGD opt({optim::ParamGroupSpec{{a}, 0.5, std::nullopt}, optim::ParamGroupSpec{{b}, std::nullopt, 1.0}},
                   optim::SGDOptions(0.1));
    REQUIRE(opt.param_groups().size() == 2);
    CHECK(opt.param_groups()[0].lr == 0.5);
    CHECK(opt.param_groups()[1].lr == 0.1);
    sum(a + b).backward();  // both gradients 1
    opt.step();
    CHECK(a(0) == 1.0 - 0.5 * 1.0);
    CHECK(b(0) == 1.0 - 0.1 * (1.0 + 1.0 * 1.0));
    opt.param_groups()[1].lr = 0.0;
    opt.step();
    CHECK(b(0) == 1.0 - 0.1 * 2.0);
}

TEST_CASE("bad optimizer arguments give clear errors", "[optim]") {
    Tensor w(Array{1.0}, true);
    CHECK_THROWS_WITH(optim::SGD({w}, optim::SGDOptions(-1.0)), Catch::Contains("invalid learning rate"));
    CHECK_THROWS_WITH(optim::SGD({w}, optim::SGDOptions(0.1).nesterov(true)), Catch::Contains("nesterov"));
    CHECK_THROWS_WITH(optim::Adam({w}, optim::AdamOptions(0.1).beta1(1.0)), Catch::Contains("beta1"));
    CHECK_THROWS_WITH(optim::SGD({w, w}, optim::SGDOptions(0.1)), Catch::Contains("listed twice"));
    Tensor not_leaf = w * 2.0;
    CHECK_THROWS_WITH(optim::SGD({not_leaf}, optim::SGDOptions(0.1)), Catch::Contains("not a leaf"));
}

TEST_CASE("optimizer state_dict round trip continues bit for bit", "[optim]") {
    auto run = [](optim::Optimizer& opt, Tensor& w, int steps) {
        for (int i = 0; i < steps; ++i) {
            opt.zero_grad();
            sum(w * w * w).backward();
            opt.step();
        }
    };
    Tensor w1(Array{0.5, -1.0, 2.0}, true);
    optim::Adam straight({w1}, optim::AdamOptions(0.05).weight_decay(0.01));
    run(straight, w1, 7);

    Tensor w2(Array{0.5, -1.0, 2.0}, true);
    NamedArrays saved;
    {
        optim::Adam first({w2}, optim::AdamOptions(0.05).weight_decay(0.01));
        run(first, w2, 3);
        saved = first.state_dict();
    }
    optim::Adam resumed({w2}, optim::AdamOptions(0.05).weight_decay(0.01));
    resumed.load_state_dict(saved);
    run(resumed, w2, 4);
    const bool identical = w1.value() == w2.value();
    CHECK(identical);
}

TEST_CASE("optimizer load_state_dict validates before changing anything", "[optim]") {
    Tensor w(Array{1.0, 2.0}, true);
    optim::SGD opt({w}, optim::SGDOptions(0.1).momentum(0.9));
    sum(w * w).backward();
    opt.step();
    const auto good = opt.state_dict();

    auto with = [&](const std::string& key, Array value) {
        auto s = good;
        for (auto& [k, v] : s) if (k == key) v = value;
        return s;
    };
    CHECK_THROWS_WITH(opt.load_state_dict(with("state.0.momentum_buffer", Array{1.0, 2.0, 3.0})),
                      Catch::Contains("state.0.momentum_buffer") && Catch::Contains("(3,)"));
    auto extra = good;
    extra.emplace_back("state.0.exp_avg", Array{0.0, 0.0});
    CHECK_THROWS_WITH(opt.load_state_dict(extra), Catch::Contains("unexpected entry 'state.0.exp_avg'"));
    CHECK_THROWS_WITH(opt.load_state_dict(with("param_groups.0.num_params", Array{2.0})),
                      Catch::Contains("holds 2 parameters"));
    // Adam state into SGD: named, not silently ignored.
    Tensor v(Array{1.0, 2.0}, true);
    optim::Adam adam({v});
    sum(v * v).backward();
    adam.step();
    CHECK_THROWS_WITH(opt.load_state_dict(adam.state_dict()), Catch::Contains("momentum_buffer"));
    const bool unchanged = opt.state_dict() == good;
    CHECK(unchanged);
}

TEST_CASE("a parameter resized after its state was created is refused, not overrun", "[optim]") {
    Tensor w(Array{1.0, 2.0}, true);
    optim::Adam opt({w});
    sum(w * w).backward();
    opt.step();
    w.mutable_value() = Array{1.0, 2.0, 3.0};
    w.zero_grad();
    sum(w * w).backward();
    CHECK_THROWS_WITH(opt.step(), Catch::Contains("now has shape (3,)") && Catch::Contains("(2,)"));
}

}  // namespace xg_test_optim
