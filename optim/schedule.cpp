#include "optim/schedule.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace xg::optim {

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
    if (optimizer.param_groups().empty()) fail("LRScheduler", "the optimizer has no parameter groups");
}

void LRScheduler::apply() {
    for (ParamGroup& group : optimizer_.param_groups()) group.lr = chained_lr(group.lr, group.initial_lr);
}

void LRScheduler::step() {
    ++last_step_;
    apply();
}

void LRScheduler::step(std::int64_t epoch) {
    if (epoch < 0) fail("LRScheduler.step", fmt::format("epoch must be >= 0, got {}", epoch));
    last_step_ = epoch;
    for (ParamGroup& group : optimizer_.param_groups()) group.lr = closed_form_lr(group.initial_lr);
}

// lr / factor(step - 1) is what the lr would be without this schedule; times factor(step) is the
// lr with it. While the lr is still exactly this schedule's closed form (alone, or the others'
// factors are 1 so far), the closed form continues, so a lone schedule gives initial_lr *
// factor(step) to the bit, at any initial lr; dividing would leave it an ulp off now and then.
double LRScheduler::chained_lr(double lr, double initial_lr) const {
    const double now = factor(last_step_);
    if (last_step_ == 0) return lr * now;
    const double before = factor(last_step_ - 1);
    if (now == before) return lr;
    if (lr == initial_lr * before) return initial_lr * now;
    if (before == 0.0) {  // unreachable for the schedules here: a zero factor stays zero
        fail("LRScheduler", fmt::format("cannot rescale the lr from a factor of 0 at step {}", last_step_ - 1));
    }
    return lr / before * now;
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
}

// ---- schedules ----------------------------------------------------------------------------

ConstantLR::ConstantLR(Optimizer& optimizer, double factor, std::int64_t total_iters)
    : LRScheduler(optimizer), factor_(factor), total_iters_(total_iters) {
    if (!(factor >= 0.0 && factor <= 1.0)) {
        fail("ConstantLR", fmt::format("factor must be in [0, 1] (as in PyTorch), got {}", factor));
    }
    if (total_iters < 0) fail("ConstantLR", fmt::format("total_iters must be >= 0, got {}", total_iters));
    if (factor == 0.0 && total_iters > 0) {
        fail("ConstantLR", fmt::format("factor 0 with total_iters {}: the lr is divided by the factor at step total_iters "
                                       "to undo it (PyTorch divides by zero there); use a small positive factor",
                                       total_iters));
    }
    apply();
}

// PyTorch's closed form, factor + (step >= total_iters) * (1 - factor).
double ConstantLR::factor(std::int64_t step) const { return step >= total_iters_ ? factor_ + (1.0 - factor_) : factor_; }

// PyTorch multiplies by factor at step 0 even when total_iters is 0, which then stays forever,
// against its own closed form (1 from total_iters on); here step 0 with total_iters 0 is 1.
double ConstantLR::chained_lr(double lr, double /*initial_lr*/) const {
    const std::int64_t step = last_step();
    if (step == 0) return total_iters_ > 0 ? lr * factor_ : lr;
    if (step != total_iters_) return lr;
    return lr * (1.0 / factor_);
}

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

LambdaLR::LambdaLR(Optimizer& optimizer, std::function<double(std::int64_t)> lr_lambda)
    : LRScheduler(optimizer), lambda_(std::move(lr_lambda)) {
    if (!lambda_) fail("LambdaLR", "lr_lambda is empty");
    apply();
}

double LambdaLR::factor(std::int64_t step) const {
    const double f = lambda_(step);
    if (!(f >= 0.0) || !std::isfinite(f)) fail("LambdaLR", fmt::format("lr_lambda({}) returned {}, not a finite factor >= 0", step, f));
    return f;
}

// Not chainable in PyTorch either: initial_lr * lambda(step), whatever the lr is now.
double LambdaLR::chained_lr(double /*lr*/, double initial_lr) const { return initial_lr * factor(last_step()); }

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor, std::int64_t total_iters)
    : LRScheduler(optimizer), start_(start_factor), end_(end_factor), total_(total_iters) {
    if (!(start_factor > 0.0 && start_factor <= 1.0)) {
        fail("LinearLR", fmt::format("start_factor must be in (0, 1], got {}", start_factor));
    }
    if (!(end_factor >= 0.0 && end_factor <= 1.0)) fail("LinearLR", fmt::format("end_factor must be in [0, 1], got {}", end_factor));
    if (total_iters <= 0) fail("LinearLR", fmt::format("total_iters must be positive, got {}", total_iters));
    apply();
}

double LinearLR::factor(std::int64_t step) const {
    return start_ + (end_ - start_) * static_cast<double>(std::min(total_, step)) / static_cast<double>(total_);
}

// The lr at step s over the lr at s - 1 is factor(s) / factor(s - 1) = 1 + (end - start) /
// (total start + (s - 1) (end - start)), PyTorch's expression.
double LinearLR::chained_lr(double lr, double /*initial_lr*/) const {
    const std::int64_t step = last_step();
    if (step == 0) return lr * start_;
    if (step > total_) return lr;
    return lr * (1.0 + (end_ - start_) / (static_cast<double>(total_) * start_ +
                                         static_cast<double>(step - 1) * (end_ - start_)));
}

StepLR::StepLR(Optimizer& optimizer, std::int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
    if (step_size <= 0) fail("StepLR", fmt::format("step_size must be positive, got {}", step_size));
    if (!(gamma >= 0.0) || !std::isfinite(gamma)) fail("StepLR", fmt::format("gamma must be finite and >= 0, got {}", gamma));
    apply();
}

double StepLR::factor(std::int64_t step) const { return std::pow(gamma_, static_cast<double>(step / step_size_)); }

double StepLR::chained_lr(double lr, double /*initial_lr*/) const {
    const std::int64_t step = last_step();
    return step == 0 || step % step_size_ != 0 ? lr : lr * gamma_;
}

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<std::int64_t> milestones, double gamma)
    : LRScheduler(optimizer), milestones_(std::move(milestones)), gamma_(gamma) {
    for (std::int64_t m : milestones_) {
        if (m < 0) fail("MultiStepLR", fmt::format("milestones must be >= 0, got {}", m));
    }
    if (!(gamma >= 0.0) || !std::isfinite(gamma)) {
        fail("MultiStepLR", fmt::format("gamma must be finite and >= 0, got {}", gamma));
    }
    std::sort(milestones_.begin(), milestones_.end());
    apply();
}

double MultiStepLR::factor(std::int64_t step) const {
    const auto passed = std::upper_bound(milestones_.begin(), milestones_.end(), step) - milestones_.begin();
    return std::pow(gamma_, static_cast<double>(passed));
}

// At a milestone (listed k times) the lr is multiplied by gamma^k.
double MultiStepLR::chained_lr(double lr, double /*initial_lr*/) const {
    const auto times = std::count(milestones_.begin(), milestones_.end(), last_step());
    return times == 0 ? lr : lr * std::pow(gamma_, static_cast<double>(times));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, std::int64_t T_max, double eta_min)
    : LRScheduler(optimizer), t_max_(T_max), eta_min_(eta_min) {
    if (T_max <= 0) fail("CosineAnnealingLR", fmt::format("T_max must be positive, got {}", T_max));
    if (!(eta_min >= 0.0) || !std::isfinite(eta_min)) {
        fail("CosineAnnealingLR", fmt::format("eta_min must be finite and >= 0, got {}", eta_min));
    }
    apply();
}

double CosineAnnealingLR::factor(std::int64_t step) const {
    return (1.0 + std::cos(M_PI * static_cast<double>(step) / static_cast<double>(t_max_))) / 2.0;
}

double CosineAnnealingLR::closed_form_lr(double initial_lr) const {
    return eta_min_ + (initial_lr - eta_min_) * (1.0 + std::cos(M_PI * static_cast<double>(last_step()) /
                                                                static_cast<double>(t_max_))) / 2.0;
}

// PyTorch's recursive form: (lr - eta_min) scaled by the cosine's ratio; at T_max + 1 (and every
// 2 T_max after), where the previous cosine term is 0, the step up is added instead.
double CosineAnnealingLR::chained_lr(double lr, double initial_lr) const {
    const std::int64_t step = last_step();
    const double t_max = static_cast<double>(t_max_);
    if (step == 0) return lr;
    if ((step - 1 - t_max_) % (2 * t_max_) == 0) return lr + (initial_lr - eta_min_) * (1.0 - std::cos(M_PI / t_max)) / 2.0;
    return (1.0 + std::cos(M_PI * static_cast<double>(step) / t_max)) /
               (1.0 + std::cos(M_PI * static_cast<double>(step - 1) / t_max)) * (lr - eta_min_) + eta_min_;
}

}  // namespace xg::optim
