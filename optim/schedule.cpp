#include "optim/schedule.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace xg::optim {

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
    if (optimizer.param_groups().empty()) fail("LRScheduler", "the optimizer has no parameter groups");
}

void LRScheduler::apply() {
    const double f = factor(last_step_);
    for (ParamGroup& group : optimizer_.param_groups()) group.lr = group.initial_lr * f;
}

void LRScheduler::step() {
    ++last_step_;
    apply();
}

double LRScheduler::lr() const { return optimizer_.param_groups().front().lr; }

NamedArrays LRScheduler::state_dict() const {
    Array s = Array::from_shape(Shape{});
    s() = static_cast<double>(last_step_);
    return {{"last_step", s}};
}

void LRScheduler::validate_state_dict(const NamedArrays& state) const {
    const char* op = "LRScheduler.load_state_dict";
    if (state.size() != 1 || state[0].first != "last_step") {
        fail(op, fmt::format("expected exactly one entry 'last_step', got {} entries", state.size()));
    }
    const Array& a = state[0].second;
    if (a.size() != 1) fail(op, fmt::format("entry 'last_step' should hold one value, has shape {}",
                                            shape_str(Shape(a.shape().begin(), a.shape().end()))));
    const double v = a.data()[0];
    if (!(v >= 0) || v != std::floor(v) || v > 9007199254740992.0) {
        fail(op, fmt::format("entry 'last_step' should be a non-negative whole number, got {}", v));
    }
}

void LRScheduler::load_state_dict(const NamedArrays& state) {
    validate_state_dict(state);
    last_step_ = static_cast<std::int64_t>(state[0].second.data()[0]);
    apply();
}

// ---- schedules ----------------------------------------------------------------------------

ConstantLR::ConstantLR(Optimizer& optimizer, double factor, std::int64_t total_iters)
    : LRScheduler(optimizer), factor_(factor), total_iters_(total_iters) {
    if (!(factor >= 0.0) || !std::isfinite(factor)) fail("ConstantLR", fmt::format("invalid factor {}", factor));
    if (total_iters < 0) fail("ConstantLR", fmt::format("total_iters must be >= 0, got {}", total_iters));
    apply();
}

double ConstantLR::factor(std::int64_t step) const { return step < total_iters_ ? factor_ : 1.0; }

LinearWarmup::LinearWarmup(Optimizer& optimizer, std::int64_t warmup_steps)
    : LRScheduler(optimizer), warmup_(warmup_steps) {
    if (warmup_steps <= 0) fail("LinearWarmup", fmt::format("warmup_steps must be positive, got {}", warmup_steps));
    apply();
}

double LinearWarmup::factor(std::int64_t step) const {
    return std::min(1.0, static_cast<double>(step + 1) / static_cast<double>(warmup_));
}

WarmupCosine::WarmupCosine(Optimizer& optimizer, std::int64_t warmup_steps, std::int64_t total_steps,
                           double min_lr_ratio)
    : LRScheduler(optimizer), warmup_(warmup_steps), total_(total_steps), min_lr_ratio_(min_lr_ratio) {
    if (warmup_steps < 0 || total_steps <= warmup_steps) {
        fail("WarmupCosine", fmt::format("need 0 <= warmup_steps < total_steps, got warmup_steps {} and total_steps {}",
                                         warmup_steps, total_steps));
    }
    if (!(min_lr_ratio >= 0.0 && min_lr_ratio <= 1.0)) {
        fail("WarmupCosine", fmt::format("min_lr_ratio must be in [0, 1], got {}", min_lr_ratio));
    }
    apply();
}

double WarmupCosine::factor(std::int64_t step) const {
    if (step < warmup_) return static_cast<double>(step + 1) / static_cast<double>(warmup_);
    const double progress =
        std::min(1.0, static_cast<double>(step + 1 - warmup_) / static_cast<double>(total_ - warmup_));
    const double cosine = 0.5 * (1.0 + std::cos(M_PI * progress));
    return min_lr_ratio_ + (1.0 - min_lr_ratio_) * cosine;
}

InverseSqrtWarmup::InverseSqrtWarmup(Optimizer& optimizer, std::int64_t d_model, std::int64_t warmup_steps)
    : LRScheduler(optimizer), d_model_(d_model), warmup_(warmup_steps) {
    if (d_model <= 0 || warmup_steps <= 0) {
        fail("InverseSqrtWarmup", fmt::format("d_model and warmup_steps must be positive, got {} and {}", d_model,
                                              warmup_steps));
    }
    apply();
}

double InverseSqrtWarmup::factor(std::int64_t step) const {
    const double n = static_cast<double>(step + 1);
    return std::pow(static_cast<double>(d_model_), -0.5) *
           std::min(std::pow(n, -0.5), n * std::pow(static_cast<double>(warmup_), -1.5));
}

}  // namespace xg::optim
