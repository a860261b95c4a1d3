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

// Step `step`'s gradients, on the float32 grid, into both sets of parameters; clipped in each (the
// norms agree to the last bit), the float64 ones rounded as the float32 ones are stored.
void set_step_gradients(std::vector<Tensor>& p32, std::vector<Tensor>& p64, int step, double clip) {
    for (std::size_t k = 0; k < p32.size(); ++k) {
        const xg::Array g = xg::to_float64_array(xg::to_float32_array(twin_leaf(p32[k].shape(), 140 + 10 * step + k, 2.0).value()));
        p32[k].set_grad(g);
        p64[k].set_grad(g);
    }
    if (clip > 0) {
        CHECK(xg::optim::clip_grad_norm(p32, clip) == xg::optim::clip_grad_norm(p64, clip));
        for (Tensor& p : p64) xg::round_to_float32(p.mutable_grad().data(), p.numel());
    }
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
        set_step_gradients(p32, p64, step, clip);
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

TEST_CASE("float32: SGD steps float32 storage natively, bit for bit float64 arithmetic rounded at each store, "
          "without float64 mirrors", "[float32][optim]") {
    using namespace xg::optim;
    check_native("SGD", [](std::vector<Tensor> p) { return std::make_unique<SGD>(p, SGDOptions(0.1)); });
    check_native("SGD momentum 0.9, dampening 0.1, weight_decay 0.01, maximize", [](std::vector<Tensor> p) {
        return std::make_unique<SGD>(p, SGDOptions(0.1).momentum(0.9).dampening(0.1).weight_decay(0.01).maximize(true));
    });
    check_native("SGD nesterov", [](std::vector<Tensor> p) { return std::make_unique<SGD>(p, SGDOptions(0.05).momentum(0.9).nesterov(true)); });
}

// ---- Adam in float arithmetic ------------------------------------------------------------------

struct AdamSetup {
    xg::optim::AdamOptions options;
    bool decoupled = false;  // AdamW
    std::unique_ptr<xg::optim::Optimizer> make(std::vector<Tensor> p) const {
        if (!decoupled) return std::make_unique<xg::optim::Adam>(p, options);
        const xg::optim::AdamOptions& o = options;
        return std::make_unique<xg::optim::AdamW>(
            p, xg::optim::AdamWOptions(o.lr()).betas(o.beta1(), o.beta2()).eps(o.eps()).weight_decay(o.weight_decay()).amsgrad(o.amsgrad()));
    }
};

// How far one float32 Adam step may be from float64 arithmetic on the same float32 inputs, entry by
// entry: each op of optim/adam.cpp rounds once (relative u), each of its float constants (beta1,
// 1 - beta1, ..., -step_size, sqrt(bc2), eps, 1 - lr wd) is off by u, and the errors propagate:
//   d  = g + wd w (Adam's L2 only)             dd <= u (|g| + 3 |wd w|)
//   m' = b1 m + (1 - b1) d                     dm <= 3u (b1 |m| + (1 - b1) |d|) + (1 - b1) dd
//   v' = b2 v + (1 - b2) d^2 (terms >= 0)      dv <= 4u v' + (1 - b2) (2 |d| dd + dd^2)
//   s  = max(v_max, v') (AMSGrad; 1-Lipschitz) ds <= dv
//   D  = sqrt(s) / sqrt(bc2) + eps (all > 0)   dD / D <= ds / s + 4u  (sqrt halves ds/s: not claimed)
//   w' = w (1 - lr wd) + (-step) m' / D        dw <= 2u |w| (AdamW) + step (dm + |m'| (3u + dD/D)) / (D (1 - dD/D))
//                                                    + u |w'|
// and a factor (1 + 16u) for the products of small errors left out above.
struct AdamBounds {
    std::vector<double> w, m, v;
};

AdamBounds adam_float_bounds(const AdamSetup& setup, std::int64_t step, const Array& w, const Array& g, const Array& m,
                             const Array* v_max, const Array& w_new, const Array& m_new, const Array& v_new) {
    const double u = xg::unit_roundoff(xg::kFloat32);
    const xg::optim::AdamOptions& o = setup.options;
    const double b1 = o.beta1(), b2 = o.beta2(), wd = o.weight_decay(), lr = o.lr();
    const double step_size = lr / (1.0 - std::pow(b1, static_cast<double>(step)));
    const double bc2_sqrt = std::sqrt(1.0 - std::pow(b2, static_cast<double>(step)));
    const bool l2 = wd != 0.0 && !setup.decoupled, decoupled = wd != 0.0 && setup.decoupled;
    AdamBounds b;
    for (std::size_t i = 0; i < w.size(); ++i) {
        const double wi = w.data()[i], gi = g.data()[i];
        const double d = l2 ? gi + wd * wi : gi;
        const double dd = l2 ? u * (std::fabs(gi) + 3.0 * std::fabs(wd * wi)) : 0.0;
        const double dm = 3.0 * u * (b1 * std::fabs(m.data()[i]) + (1.0 - b1) * std::fabs(d)) + (1.0 - b1) * dd;
        const double vi = v_new.data()[i];
        const double dv = 4.0 * u * vi + (1.0 - b2) * (2.0 * std::fabs(d) * dd + dd * dd);
        const double s = v_max != nullptr ? std::max(v_max->data()[i], vi) : vi;
        const double rel_denom = (s > 0.0 ? dv / s : 0.0) + 4.0 * u;
        const double denom = std::sqrt(s) / bc2_sqrt + o.eps();
        const double du = step_size * (dm + std::fabs(m_new.data()[i]) * (3.0 * u + rel_denom)) / (denom * (1.0 - rel_denom));
        const double dw = (decoupled ? 2.0 * u * std::fabs(wi) : 0.0) + du + u * std::fabs(w_new.data()[i]);
        b.w.push_back(dw * (1.0 + 16.0 * u));
        b.m.push_back(dm * (1.0 + 16.0 * u));
        b.v.push_back(dv * (1.0 + 16.0 * u));
    }
    return b;
}

const Array& state_entry(const xg::NamedArrays& state, const std::string& key) {
    for (const auto& [k, value] : state) {
        if (k == key) return value;
    }
    FAIL("no state entry " << key);
    return state.front().second;
}

// The largest |float32 - float64| / bound over the entries.
double worst_ratio(const Array& got, const Array& reference, const std::vector<double>& bound) {
    double worst = 0.0;
    for (std::size_t i = 0; i < got.size(); ++i) {
        const double error = std::fabs(got.data()[i] - reference.data()[i]);
        worst = std::max(worst, bound[i] > 0.0 ? error / bound[i] : (error == 0.0 ? 0.0 : HUGE_VAL));
    }
    return worst;
}

// Steps a float32 Adam natively and, from the same float32 values each step, a float64 one: every
// parameter and moment entry must lie within adam_float_bounds of the float64 result, and step()
// must leave the float32 parameters without a float64 mirror.
void check_adam_native(const std::string& name, const AdamSetup& setup, double clip = 0) {
    INFO(name);
    std::vector<Tensor> p32 = {Tensor(twin_leaf({4, 5}, 131).value(), xg::kFloat32, true),
                               Tensor(twin_leaf({3}, 132).value(), xg::kFloat32, true),
                               Tensor(twin_leaf({64, 33}, 133).value(), xg::kFloat32, true)};
    std::vector<Tensor> p64 = {widened_twin(p32[0]), widened_twin(p32[1]), widened_twin(p32[2])};
    const auto o32 = setup.make(p32), o64 = setup.make(p64);
    double worst = 0.0;
    for (int step = 0; step < kSteps; ++step) {
        INFO("step " << step);
        set_step_gradients(p32, p64, step, clip);
        const xg::NamedArrays before = o64->state_dict();
        std::vector<Array> w_before, g_before;
        for (const Tensor& p : p64) {
            w_before.push_back(p.value());
            g_before.push_back(p.grad_value());
        }
        o32->step();
        o64->step();
        const xg::NamedArrays s32 = o32->state_dict(), s64 = o64->state_dict();
        for (std::size_t k = 0; k < p32.size(); ++k) {
            INFO("parameter " << k);
            CHECK(no_mirror(p32[k]));
            const std::string key = fmt::format("state.{}.", k);
            const Array zeros = xt::zeros<double>(w_before[k].shape());
            const Array& m = step == 0 ? zeros : state_entry(before, key + "exp_avg");
            const Array* v_max = setup.options.amsgrad() ? (step == 0 ? &zeros : &state_entry(before, key + "max_exp_avg_sq")) : nullptr;
            const Array &m64 = state_entry(s64, key + "exp_avg"), &v64 = state_entry(s64, key + "exp_avg_sq");
            const AdamBounds b = adam_float_bounds(setup, step + 1, w_before[k], g_before[k], m, v_max, p64[k].value(), m64, v64);
            const double rw = worst_ratio(xg::to_float64_array(p32[k].values<float>()), p64[k].value(), b.w);
            const double rm = worst_ratio(state_entry(s32, key + "exp_avg"), m64, b.m);
            const double rv = worst_ratio(state_entry(s32, key + "exp_avg_sq"), v64, b.v);
            CHECK(rw <= 1.0);
            CHECK(rm <= 1.0);
            CHECK(rv <= 1.0);
            worst = std::max({worst, rw, rm, rv});
        }
        // the next step starts from the float32 results on both sides
        for (std::size_t k = 0; k < p32.size(); ++k) p64[k].mutable_value() = xg::to_float64_array(p32[k].values<float>());
        o64->load_state_dict(s32);
    }
    if (std::getenv("XGRAD_PRINT_TWIN_RATIOS") != nullptr) fmt::print("{:7.3g} of the bound  {} (float arithmetic)\n", worst, name);
    CHECK(o32->float32_keys().size() == 3 * o32->buffer_names().size());
}

TEST_CASE("float32: Adam and AdamW step float32 storage natively in float arithmetic, within the derived bound of "
          "float64 arithmetic on the same values, without float64 mirrors", "[float32][optim]") {
    using namespace xg::optim;
    check_adam_native("Adam lr 0.05", {AdamOptions(0.05)});
    check_adam_native("Adam amsgrad, weight_decay 0.01", {AdamOptions(0.05).amsgrad(true).weight_decay(0.01)});
    check_adam_native("Adam weight_decay 0.5 (L2: d = g + wd w cancels)", {AdamOptions(0.05).weight_decay(0.5)});
    check_adam_native("AdamW, clip_grad_norm 1.0", {AdamOptions(0.05).weight_decay(0.1), true}, 1.0);
    check_adam_native("AdamW amsgrad, eps 1e-3", {AdamOptions(1e-3).eps(1e-3).weight_decay(0.01).amsgrad(true), true});
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
