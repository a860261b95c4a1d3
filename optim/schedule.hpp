// Learning-rate schedules: each sets every group's lr = initial_lr * factor(step), like
// torch.optim.lr_scheduler.LambdaLR (CosineAnnealingLR adds its eta_min floor). Construction
// applies factor(0); call step() once per iteration (or epoch) after optimizer.step(). The exact
// formulas are in tests/fixtures/README.md (sched_*). PyTorch's own LinearLR, StepLR,
// MultiStepLR and CosineAnnealingLR update lr recursively; the closed forms here give the same
// values up to rounding, and test_schedule.cpp checks them against PyTorch.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "optim/optimizer.hpp"

namespace xg::optim {

/// The base of the schedules: every group's lr = initial_lr * factor(step), like LambdaLR.
class LRScheduler {
public:
    virtual ~LRScheduler() = default;
    /// Advances one iteration and sets each group's lr to initial_lr * factor(new step).
    void step();
    /// The multiplier of initial_lr at iteration `step` (0-based).
    virtual double factor(std::int64_t step) const = 0;
    /// Iterations done so far (the argument of the current factor).
    std::int64_t last_step() const { return last_step_; }
    /// The current lr of group 0.
    double lr() const;

    /// {"last_step"}: restoring it (after the optimizer's own state) recomputes every group's lr.
    NamedArrays state_dict() const;
    /// Checks a state_dict() (one whole non-negative 'last_step') and throws xg::Error if it is not
    /// one; changes nothing.
    void validate_state_dict(const NamedArrays& state) const;
    /// Validates, then restores last_step and recomputes every group's lr.
    void load_state_dict(const NamedArrays& state);

protected:
    /// Binds `optimizer` (which must outlive the scheduler); throws xg::Error if it has no groups.
    explicit LRScheduler(Optimizer& optimizer);
    /// Subclasses call this at the end of their constructor (factor() is virtual).
    void apply();
    /// A group's lr at `step` from its initial lr: initial_lr * factor(step) unless overridden.
    virtual double lr_at(std::int64_t step, double initial_lr) const { return initial_lr * factor(step); }

private:
    Optimizer& optimizer_;
    std::int64_t last_step_ = 0;
};

/// factor = `factor` for the first total_iters steps, then 1 (torch's ConstantLR; defaults: always 1).
class ConstantLR : public LRScheduler {
public:
    /// Throws xg::Error for a negative or non-finite factor or negative total_iters.
    explicit ConstantLR(Optimizer& optimizer, double factor = 1.0, std::int64_t total_iters = 0);
    double factor(std::int64_t step) const override;

private:
    double factor_;
    std::int64_t total_iters_;
};

/// factor = min(1, (step + 1) / warmup_steps).
class LinearWarmup : public LRScheduler {
public:
    /// Throws xg::Error unless warmup_steps > 0.
    LinearWarmup(Optimizer& optimizer, std::int64_t warmup_steps);
    double factor(std::int64_t step) const override;

private:
    std::int64_t warmup_;
};

/// Linear warm-up to 1 over warmup_steps, then a half cosine down to min_lr_ratio at step
/// total_steps - 1 (and min_lr_ratio after):
///   step < warmup: (step + 1) / warmup
///   else:          p = min(1, (step + 1 - warmup) / (total - warmup));
///                  min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + cos(pi * p))
class WarmupCosine : public LRScheduler {
public:
    /// Throws xg::Error unless 0 <= warmup_steps < total_steps and min_lr_ratio is in [0, 1].
    WarmupCosine(Optimizer& optimizer, std::int64_t warmup_steps, std::int64_t total_steps, double min_lr_ratio = 0.0);
    double factor(std::int64_t step) const override;

private:
    std::int64_t warmup_, total_;
    double min_lr_ratio_;
};

/// The Transformer's schedule ("Attention is all you need", eq. 3), with n = step + 1:
///   factor = d_model^-0.5 * min(n^-0.5, n * warmup^-1.5).
/// Use it with initial lr 1 (or a multiplier of the paper's rate).
class InverseSqrtWarmup : public LRScheduler {
public:
    /// Throws xg::Error unless d_model and warmup_steps are positive.
    InverseSqrtWarmup(Optimizer& optimizer, std::int64_t d_model, std::int64_t warmup_steps);
    double factor(std::int64_t step) const override;

private:
    std::int64_t d_model_, warmup_;
};

/// factor = lr_lambda(step) for any callable (torch's LambdaLR), e.g.
/// `LambdaLR(opt, [](std::int64_t s) { return std::pow(0.95, s); })`.
class LambdaLR : public LRScheduler {
public:
    /// Throws xg::Error if lr_lambda is empty; factor() throws if it returns a negative or
    /// non-finite value.
    LambdaLR(Optimizer& optimizer, std::function<double(std::int64_t)> lr_lambda);
    double factor(std::int64_t step) const override;

private:
    std::function<double(std::int64_t)> lambda_;
};

/// factor = start + (end - start) * min(step, total_iters) / total_iters (torch's LinearLR):
/// a linear ramp from start_factor to end_factor over total_iters steps, then constant.
class LinearLR : public LRScheduler {
public:
    /// PyTorch's defaults and checks: 0 < start_factor <= 1, 0 <= end_factor <= 1; total_iters
    /// must be positive. Otherwise xg::Error.
    explicit LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3.0, double end_factor = 1.0,
                      std::int64_t total_iters = 5);
    double factor(std::int64_t step) const override;

private:
    double start_, end_;
    std::int64_t total_;
};

/// factor = gamma^floor(step / step_size) (torch's StepLR).
class StepLR : public LRScheduler {
public:
    /// Throws xg::Error unless step_size > 0 and gamma is finite and >= 0.
    StepLR(Optimizer& optimizer, std::int64_t step_size, double gamma = 0.1);
    double factor(std::int64_t step) const override;

private:
    std::int64_t step_size_;
    double gamma_;
};

/// factor = gamma^(number of milestones <= step), a milestone listed twice counting twice
/// (torch's MultiStepLR).
class MultiStepLR : public LRScheduler {
public:
    /// Milestones in any order (non-negative); throws xg::Error for a negative milestone or a
    /// gamma that is negative or not finite.
    MultiStepLR(Optimizer& optimizer, std::vector<std::int64_t> milestones, double gamma = 0.1);
    double factor(std::int64_t step) const override;

private:
    std::vector<std::int64_t> milestones_;  // sorted
    double gamma_;
};

/// Half a cosine from each group's initial lr down to eta_min over T_max steps (torch's
/// CosineAnnealingLR, which keeps following the cosine past T_max):
///   lr = eta_min + (initial_lr - eta_min) * factor(step),  factor = (1 + cos(pi * step / T_max)) / 2.
class CosineAnnealingLR : public LRScheduler {
public:
    /// Throws xg::Error unless T_max > 0 and eta_min is finite and >= 0.
    CosineAnnealingLR(Optimizer& optimizer, std::int64_t T_max, double eta_min = 0.0);
    double factor(std::int64_t step) const override;

protected:
    double lr_at(std::int64_t step, double initial_lr) const override;

private:
    std::int64_t t_max_;
    double eta_min_;
};

}  // namespace xg::optim
