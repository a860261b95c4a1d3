// Learning-rate schedules, chainable as PyTorch's: step() scales each group's *current* lr (the
// recursive `get_lr` of torch.optim.lr_scheduler 1.13, operation for operation), so two schedules
// on one optimizer compose - a warm-up times a step decay - instead of the last one overwriting
// the other. Alone, a schedule gives initial_lr * factor(step) up to rounding (factor() is its
// closed form; step(epoch) jumps to it, as PyTorch's deprecated step(epoch) does). Construction
// applies step 0; call step() once per iteration (or epoch) after optimizer.step(). LambdaLR is
// the exception, as in PyTorch: it sets initial_lr * lambda(step), whatever others did.
// docs/training.md ("Schedules") has the table; tests/optim/test_optim_schedule.cpp and
// test_optim_parity.cpp check single schedules and chains against PyTorch.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "optim/optimizer.hpp"

namespace xg::optim {

/// The base of the schedules. step() runs the chainable update on every group; factor() is the
/// closed form, the multiplier of initial_lr when the schedule runs alone.
class LRScheduler {
public:
    virtual ~LRScheduler() = default;
    /// Advances one iteration and rescales each group's current lr (PyTorch's step()).
    void step();
    /// Jumps to iteration `epoch` (>= 0) and sets each group's lr to the closed form from its
    /// initial lr, discarding what other schedules did (PyTorch's deprecated step(epoch)).
    void step(std::int64_t epoch);
    /// The multiplier of initial_lr at iteration `step` (0-based) when this schedule runs alone.
    virtual double factor(std::int64_t step) const = 0;
    /// Iterations done so far.
    std::int64_t last_step() const { return last_step_; }
    /// The current lr of group 0.
    double lr() const;

    /// {"last_step"}. The lr itself is the optimizer's state (param_groups.<g>.lr), as in PyTorch:
    /// restore the optimizer's state_dict too (Checkpoint does both).
    NamedArrays state_dict() const;
    /// Checks a state_dict() (one whole non-negative 'last_step') and throws xg::Error if it is not
    /// one; changes nothing.
    void validate_state_dict(const NamedArrays& state) const;
    /// Validates, then restores last_step; leaves the groups' lr alone (they come from the
    /// optimizer's state_dict), so a restored chain continues exactly where it was saved.
    void load_state_dict(const NamedArrays& state);

protected:
    /// Binds `optimizer` (which must outlive the scheduler); throws xg::Error if it has no groups.
    explicit LRScheduler(Optimizer& optimizer);
    /// Subclasses call this at the end of their constructor (the step-0 update is virtual).
    void apply();
    /// The chainable update (PyTorch's get_lr): a group's lr at last_step() from its current lr.
    /// By default a multiplicative rescale, lr / factor(step - 1) * factor(step), which is
    /// initial_lr * factor(step) exactly while the lr is still this schedule's closed form.
    virtual double chained_lr(double lr, double initial_lr) const;
    /// The closed form (PyTorch's _get_closed_form_lr): initial_lr * factor(last_step()).
    virtual double closed_form_lr(double initial_lr) const { return initial_lr * factor(last_step_); }

private:
    Optimizer& optimizer_;
    std::int64_t last_step_ = 0;
};

/// factor = `factor` for the first total_iters steps, then 1 (torch's ConstantLR; defaults: always 1).
class ConstantLR : public LRScheduler {
public:
    /// PyTorch's check: factor in [0, 1]; and factor 0 only with total_iters 0 (the chainable
    /// update divides by the factor at total_iters, where PyTorch would divide by zero); total_iters
    /// >= 0. Otherwise xg::Error naming ConstantLR and the value.
    explicit ConstantLR(Optimizer& optimizer, double factor = 1.0, std::int64_t total_iters = 0);
    double factor(std::int64_t step) const override;

protected:
    double chained_lr(double lr, double initial_lr) const override;

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
/// `LambdaLR(opt, [](std::int64_t s) { return std::pow(0.95, s); })`. Not chainable, as in
/// PyTorch: every step sets lr = initial_lr * lr_lambda(step), overwriting other schedules.
class LambdaLR : public LRScheduler {
public:
    /// Throws xg::Error if lr_lambda is empty; factor() throws if it returns a negative or
    /// non-finite value.
    LambdaLR(Optimizer& optimizer, std::function<double(std::int64_t)> lr_lambda);
    double factor(std::int64_t step) const override;

protected:
    double chained_lr(double lr, double initial_lr) const override;

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

protected:
    double chained_lr(double lr, double initial_lr) const override;

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

protected:
    double chained_lr(double lr, double initial_lr) const override;

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

protected:
    double chained_lr(double lr, double initial_lr) const override;

private:
    std::vector<std::int64_t> milestones_;  // sorted
    double gamma_;
};

/// Half a cosine from each group's initial lr down to eta_min over T_max steps (torch's
/// CosineAnnealingLR, which keeps following the cosine past T_max). Alone:
///   lr = eta_min + (initial_lr - eta_min) * factor(step),  factor = (1 + cos(pi * step / T_max)) / 2;
/// in a chain its update is PyTorch's recursive one, affine around eta_min.
class CosineAnnealingLR : public LRScheduler {
public:
    /// Throws xg::Error unless T_max > 0 and eta_min is finite and >= 0.
    CosineAnnealingLR(Optimizer& optimizer, std::int64_t T_max, double eta_min = 0.0);
    double factor(std::int64_t step) const override;

protected:
    double chained_lr(double lr, double initial_lr) const override;
    double closed_form_lr(double initial_lr) const override;

private:
    std::int64_t t_max_;
    double eta_min_;
};

}  // namespace xg::optim
