// Learning-rate schedules: each sets every group's lr = initial_lr * factor(step), like
// torch.optim.lr_scheduler.LambdaLR. Construction applies factor(0); call step() once per
// iteration after optimizer.step(). The exact formulas are in tests/fixtures/README.md (sched_*).
#pragma once

#include <cstdint>

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

}  // namespace xg::optim
