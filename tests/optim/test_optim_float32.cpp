// `ctest -L float32`: the optimizers and schedules on float32 parameters against the same steps on
// float64 ones from the same start; the parameters, gradients and optimizer state stay float32.
#include <cmath>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <xtensor/xmath.hpp>

#include "core/engine/dtype.hpp"
#include "core/engine/tensor.hpp"
#include "core/ops/ops.hpp"
#include "optim/adam.hpp"
#include "optim/clip.hpp"
#include "optim/schedule.hpp"
#include "optim/sgd.hpp"
#include "tests/support/float32_nn_twins.hpp"

namespace xg_test_optim_float32 {

using xg::Array;
using xg::Tensor;
using xg_test_support::twin_leaf;
using MakeOptimizer = std::function<std::unique_ptr<xg::optim::Optimizer>(std::vector<Tensor>)>;
using MakeSchedule = std::function<std::unique_ptr<xg::optim::LRScheduler>(xg::optim::Optimizer&)>;

constexpr int kSteps = 5;

// The condition of kSteps steps on L = 0.5 sum s (p - t)^2, s in [0.5, 1.5], |p - t| >= 1 all along:
// each step rounds p (u) and adds an update whose own error is small against |p| ~ 1-4: lr s <= 0.15
// times the gradient's error (its rounding, t's, and p's carried error, ~u |p - t|) for SGD, at most
// 1 / (1 - 0.9) = 10 stored rounding of the momentum buffer times lr s for momentum, lr (<= 0.05)
// times the relative error of m / sqrt(v) (~6u) for Adam: at most ~1u per step. So 2u per step plus
// the initial rounding of p and t: 2 kSteps + 2 = 12.
constexpr double kOptimizerCondition = 2 * kSteps + 2;

struct Run {
    std::vector<Tensor> params;
    std::unique_ptr<xg::optim::Optimizer> optimizer;
    std::vector<double> lrs;
};

// kSteps steps (zero_grad, backward, optional clipping, step, schedule) from the same start in `dtype`.
Run run(xg::Dtype dtype, const MakeOptimizer& make, const MakeSchedule& schedule, double clip) {
    const Tensor p0 = twin_leaf({4, 5}, 121), offset = twin_leaf({4, 5}, 122, 1.0, 0.0, false);
    const Tensor p1 = twin_leaf({3}, 123);
    const Tensor target0(Array(p0.value() + xt::sign(offset.value()) * (1.0 + xt::abs(offset.value()))), dtype);
    const Tensor target1(Array(p1.value() - 2.0), dtype);
    const Tensor scale0(Array(0.5 + xt::abs(twin_leaf({4, 5}, 124, 0.3).value())), dtype);
    Run r;
    r.params = {Tensor(p0.value(), dtype, true), Tensor(p1.value(), dtype, true)};
    r.optimizer = make(r.params);
    std::unique_ptr<xg::optim::LRScheduler> sched = schedule ? schedule(*r.optimizer) : nullptr;
    for (int step = 0; step < kSteps; ++step) {
        r.optimizer->zero_grad();
        const Tensor d0 = r.params[0] - target0, d1 = r.params[1] - target1;
        const Tensor loss = xg::sum(scale0 * d0 * d0) * 0.5 + xg::sum(d1 * d1) * 0.5;
        loss.backward();
        if (clip > 0) xg::optim::clip_grad_norm(r.params, clip);
        r.optimizer->step();
        if (sched) sched->step();
        r.lrs.push_back(r.optimizer->param_groups()[0].lr);
    }
    return r;
}

bool on_float32_grid(const Array& a) {
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (static_cast<double>(static_cast<float>(a.data()[i])) != a.data()[i]) return false;
    }
    return true;
}

void check_twin(const std::string& name, const MakeOptimizer& make, const MakeSchedule& schedule = nullptr, double clip = 0) {
    INFO(name);
    const Run r64 = run(xg::kFloat64, make, schedule, clip), r32 = run(xg::kFloat32, make, schedule, clip);
    CHECK(r32.lrs == r64.lrs);  // a schedule is a float64 scalar whatever the parameters' dtype
    const double u = xg::unit_roundoff(xg::kFloat32);
    for (std::size_t k = 0; k < r64.params.size(); ++k) {
        INFO("parameter " << k);
        const Tensor &p32 = r32.params[k], &p64 = r64.params[k];
        CHECK(p32.dtype() == xg::kFloat32);
        CHECK(p32.grad().dtype() == xg::kFloat32);
        CHECK(on_float32_grid(p32.value()));
        CHECK(on_float32_grid(p32.grad_value()));
        const double error = xt::amax(xt::abs(p32.value() - p64.value()))() / (u * xt::amax(xt::abs(p64.value()))());
        if (std::getenv("XGRAD_PRINT_TWIN_RATIOS") != nullptr) fmt::print("{:7.3g} / {:g}  {} p{}\n", error, kOptimizerCondition, name, k);
        CHECK(error <= kOptimizerCondition);
    }
    // the moment buffers of float32 parameters are stored as float32 (optim/optimizer.cpp)
    for (const auto& [key, value] : r32.optimizer->state_dict()) {
        if (key.rfind("state.", 0) != 0) continue;  // the groups' learning rates are float64 scalars
        INFO("state " << key);
        CHECK(on_float32_grid(value));
    }
}

TEST_CASE("float32 twin: SGD, Adam and AdamW steps agree with float64 and keep their state float32", "[float32][optim]") {
    using namespace xg::optim;
    check_twin("SGD lr 0.1", [](std::vector<Tensor> p) { return std::make_unique<SGD>(p, SGDOptions(0.1)); });
    check_twin("SGD momentum 0.9, dampening 0.1, weight_decay 0.01", [](std::vector<Tensor> p) {
        return std::make_unique<SGD>(p, SGDOptions(0.1).momentum(0.9).dampening(0.1).weight_decay(0.01));
    });
    check_twin("SGD nesterov", [](std::vector<Tensor> p) {
        return std::make_unique<SGD>(p, SGDOptions(0.05).momentum(0.9).nesterov(true));
    });
    check_twin("Adam lr 0.05", [](std::vector<Tensor> p) { return std::make_unique<Adam>(p, AdamOptions(0.05)); });
    check_twin("Adam amsgrad, weight_decay 0.01", [](std::vector<Tensor> p) {
        return std::make_unique<Adam>(p, AdamOptions(0.05).amsgrad(true).weight_decay(0.01));
    });
    check_twin("AdamW lr 0.05", [](std::vector<Tensor> p) { return std::make_unique<AdamW>(p, AdamWOptions(0.05)); });
}

TEST_CASE("float32 twin: schedules and gradient clipping on float32 parameters agree with float64", "[float32][optim]") {
    using namespace xg::optim;
    const MakeOptimizer sgd = [](std::vector<Tensor> p) { return std::make_unique<SGD>(p, SGDOptions(0.1).momentum(0.9)); };
    const MakeOptimizer adamw = [](std::vector<Tensor> p) { return std::make_unique<AdamW>(p, AdamWOptions(0.05)); };
    check_twin("SGD momentum + StepLR(2, 0.5)", sgd, [](Optimizer& o) { return std::make_unique<StepLR>(o, 2, 0.5); });
    check_twin("AdamW + WarmupCosine(2, 5)", adamw, [](Optimizer& o) { return std::make_unique<WarmupCosine>(o, 2, 5); });
    check_twin("AdamW + LinearLR", adamw, [](Optimizer& o) { return std::make_unique<LinearLR>(o); });
    // clip_grad_norm scales the float32 gradients in place: rounded again, one u more per step, kept
    // within the condition's 2u per step
    check_twin("SGD momentum, clip_grad_norm 1.0", sgd, nullptr, 1.0);
}

// The float64 parameter that a float32 one stands for: its values, widened.
Tensor widened_twin(const Tensor& p32) { return Tensor(xg::to_float64_array(p32.values<float>()), xg::kFloat64, true); }

// Rounds a float64 optimizer's parameters and state buffers to float32 in place: what a float32 step
// is defined to be (docs/precision.md): float64 arithmetic, float32 storage.
void round_like_float32(std::vector<Tensor>& params, xg::optim::Optimizer& optimizer) {
    for (Tensor& p : params) {
        xg::Array& w = p.mutable_value();
        xg::round_to_float32(w.data(), w.size());
    }
    xg::NamedArrays state = optimizer.state_dict();
    for (auto& [key, value] : state) {
        if (key.rfind("state.", 0) == 0 && key.find(".step") == std::string::npos) xg::round_to_float32(value.data(), value.size());
    }
    optimizer.load_state_dict(state);
}

bool no_mirror(const Tensor& p) {
    return p.node()->value_mirror == xg::Node::Mirror::None && p.node()->grad_mirror == xg::Node::Mirror::None;
}

// Steps a float32 optimizer natively and a float64 one whose parameters, gradients and state are
// rounded to float32 after every step; both must agree bit for bit, and step() (and clipping) must
// leave the float32 parameters without a float64 mirror.
void check_native(const std::string& name, const MakeOptimizer& make, double clip = 0) {
    INFO(name);
    std::vector<Tensor> p32 = {Tensor(twin_leaf({4, 5}, 131).value(), xg::kFloat32, true),
                               Tensor(twin_leaf({3}, 132).value(), xg::kFloat32, true)};
    std::vector<Tensor> p64 = {widened_twin(p32[0]), widened_twin(p32[1])};
    const auto o32 = make(p32), o64 = make(p64);
    for (int step = 0; step < kSteps; ++step) {
        INFO("step " << step);
        for (std::size_t k = 0; k < p32.size(); ++k) {
            const xg::Array g = xg::to_float64_array(xg::to_float32_array(twin_leaf(p32[k].shape(), 140 + 10 * step + k, 2.0).value()));
            p32[k].set_grad(g);
            p64[k].set_grad(g);
        }
        if (clip > 0) {
            CHECK(xg::optim::clip_grad_norm(p32, clip) == xg::optim::clip_grad_norm(p64, clip));
            for (Tensor& p : p64) xg::round_to_float32(p.mutable_grad().data(), p.numel());
        }
        o32->step();
        o64->step();
        round_like_float32(p64, *o64);
        for (std::size_t k = 0; k < p32.size(); ++k) {
            INFO("parameter " << k);
            CHECK(no_mirror(p32[k]));
            CHECK(xt::all(xt::equal(xg::to_float64_array(p32[k].values<float>()), p64[k].value())));
            CHECK(xt::all(xt::equal(xg::to_float64_array(p32[k].grad_values<float>()), p64[k].grad_value())));
        }
        const xg::NamedArrays s32 = o32->state_dict(), s64 = o64->state_dict();
        REQUIRE(s32.size() == s64.size());
        for (std::size_t i = 0; i < s32.size(); ++i) {
            INFO("state " << s32[i].first);
            CHECK(s32[i].first == s64[i].first);
            CHECK(xt::all(xt::equal(s32[i].second, s64[i].second)));
        }
    }
    CHECK(o32->float32_keys().size() == 2 * o32->buffer_names().size());
}

TEST_CASE("float32: optimizers step float32 storage natively, bit for bit float64 arithmetic rounded at each store, "
          "without float64 mirrors", "[float32][optim]") {
    using namespace xg::optim;
    check_native("SGD", [](std::vector<Tensor> p) { return std::make_unique<SGD>(p, SGDOptions(0.1)); });
    check_native("SGD momentum 0.9, dampening 0.1, weight_decay 0.01, maximize", [](std::vector<Tensor> p) {
        return std::make_unique<SGD>(p, SGDOptions(0.1).momentum(0.9).dampening(0.1).weight_decay(0.01).maximize(true));
    });
    check_native("SGD nesterov", [](std::vector<Tensor> p) { return std::make_unique<SGD>(p, SGDOptions(0.05).momentum(0.9).nesterov(true)); });
    check_native("Adam amsgrad, weight_decay 0.01", [](std::vector<Tensor> p) {
        return std::make_unique<Adam>(p, AdamOptions(0.05).amsgrad(true).weight_decay(0.01));
    });
    check_native("AdamW, clip_grad_norm 1.0", [](std::vector<Tensor> p) {
        return std::make_unique<AdamW>(p, AdamWOptions(0.05).weight_decay(0.1));
    }, 1.0);
}

TEST_CASE("float32: optimizer state follows a parameter converted between dtypes, and loads as float32", "[float32][optim]") {
    using namespace xg::optim;
    std::vector<Tensor> p = {Tensor(twin_leaf({6}, 133).value(), xg::kFloat64, true)};
    Adam adam(p, AdamOptions(0.05));
    p[0].set_grad(twin_leaf({6}, 134).value());
    adam.step();
    p[0].convert_in_place(xg::kFloat32);  // Module::to between steps
    p[0].set_grad(twin_leaf({6}, 135).value());
    adam.step();
    CHECK(no_mirror(p[0]));
    const xg::NamedArrays state = adam.state_dict();
    CHECK(adam.float32_keys() == std::set<std::string>{"state.0.exp_avg", "state.0.exp_avg_sq"});
    for (const auto& [key, value] : state) {
        if (key.rfind("state.0.exp", 0) == 0) CHECK(on_float32_grid(value));
    }
    Adam reloaded(p, AdamOptions(0.05));
    reloaded.load_state_dict(state);
    p[0].set_grad(twin_leaf({6}, 136).value());
    reloaded.step();
    CHECK(no_mirror(p[0]));
}

}  // namespace xg_test_optim_float32
