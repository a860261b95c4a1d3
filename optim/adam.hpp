// Adam (L2 weight decay added to the gradient) and AdamW (decoupled weight decay), with or
// without AMSGrad: torch.optim.Adam / AdamW (1.13) exactly.
#pragma once

#include "core/engine/arg.hpp"
#include "optim/optimizer.hpp"

namespace xg::optim {

/// Options of Adam, e.g. `AdamOptions(3e-4).betas(0.9, 0.95).weight_decay(0.1)`.
class AdamOptions {
public:
    /// Defaults of torch.optim.Adam with learning rate `lr`.
    explicit AdamOptions(double lr = 1e-3) : lr_(lr) {}
    /// Learning rate (default 1e-3); lr() reads it.
    XG_ARG(AdamOptions, double, lr, 1e-3);
    /// Decay of the first-moment average, in [0, 1) (default 0.9).
    XG_ARG(AdamOptions, double, beta1, 0.9);
    /// Decay of the second-moment average, in [0, 1) (default 0.999).
    XG_ARG(AdamOptions, double, beta2, 0.999);
    /// Added to the denominator sqrt(v_hat) (default 1e-8).
    XG_ARG(AdamOptions, double, eps, 1e-8);
    /// L2 penalty added to the gradient (default 0).
    XG_ARG(AdamOptions, double, weight_decay, 0.0);
    /// AMSGrad: divide by the running maximum of the second moment (default false).
    XG_ARG(AdamOptions, bool, amsgrad, false);

public:
    /// Sets beta1 and beta2 together, like torch's betas=(b1, b2).
    AdamOptions& betas(double b1, double b2) { return beta1(b1).beta2(b2); }
};

/// Options of AdamW: as Adam's, but weight decay defaults to 1e-2 (PyTorch's default).
class AdamWOptions {
public:
    /// Defaults of torch.optim.AdamW with learning rate `lr`.
    explicit AdamWOptions(double lr = 1e-3) : lr_(lr) {}
    /// Learning rate (default 1e-3); lr() reads it.
    XG_ARG(AdamWOptions, double, lr, 1e-3);
    /// Decay of the first-moment average, in [0, 1) (default 0.9).
    XG_ARG(AdamWOptions, double, beta1, 0.9);
    /// Decay of the second-moment average, in [0, 1) (default 0.999).
    XG_ARG(AdamWOptions, double, beta2, 0.999);
    /// Added to the denominator (default 1e-8).
    XG_ARG(AdamWOptions, double, eps, 1e-8);
    /// Decoupled decay: w *= 1 - lr * weight_decay each step (default 1e-2).
    XG_ARG(AdamWOptions, double, weight_decay, 1e-2);
    /// AMSGrad: divide by the running maximum of the second moment (default false).
    XG_ARG(AdamWOptions, bool, amsgrad, false);

public:
    /// Sets beta1 and beta2 together.
    AdamWOptions& betas(double b1, double b2) { return beta1(b1).beta2(b2); }
    /// The same numbers as AdamOptions (AdamW passes them to Adam's machinery).
    operator AdamOptions() const {
        return AdamOptions(lr()).betas(beta1(), beta2()).eps(eps()).weight_decay(weight_decay()).amsgrad(amsgrad());
    }
};

/// Per step t of a parameter (m, v start at 0), with g the gradient:
///   Adam:  g += weight_decay * w             AdamW: w *= 1 - lr * weight_decay
///   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
///   AMSGrad only: v_max = max(v_max, v), used below in place of v
///   w -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
/// computed in the parameter's dtype, op by op as torch.optim.Adam: a float32 parameter in float
/// (docs/precision.md bounds its error against float64 arithmetic).
class Adam : public Optimizer {
public:
    /// One group of `params`. Throws xg::Error for beta1/beta2 outside [0, 1), a negative or
    /// non-finite eps or lr, or a parameter that is undefined, not a leaf or listed twice.
    Adam(std::vector<Tensor> params, const AdamOptions& options = AdamOptions());
    /// Several groups; a group's unset lr / weight_decay take `options`' values. Errors as above.
    Adam(std::vector<ParamGroupSpec> groups, const AdamOptions& options = AdamOptions());

    /// The defaults given at construction.
    const AdamOptions& options() const { return options_; }
    std::string name() const override { return decoupled_ ? "AdamW" : "Adam"; }
    std::vector<std::string> buffer_names() const override {
        if (options_.amsgrad()) return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
        return {"exp_avg", "exp_avg_sq"};
    }

protected:
    /// For AdamW: decoupled_weight_decay applies the decay to the weights instead of the gradient.
    Adam(std::vector<ParamGroupSpec> groups, const AdamOptions& options, bool decoupled_weight_decay);
    void update(const ParamGroup& group, const UpdateSpan<double>& span) override;
    void update(const ParamGroup& group, const UpdateSpan<float>& span) override;

private:
    template <class T>
    void apply(const ParamGroup& group, const UpdateSpan<T>& span) const;
    AdamOptions options_;
    bool decoupled_ = false;
};

/// Adam with decoupled weight decay (torch.optim.AdamW); see Adam for the update.
class AdamW : public Adam {
public:
    /// One group of `params`; errors as Adam.
    AdamW(std::vector<Tensor> params, const AdamWOptions& options = AdamWOptions());
    /// Several groups; errors as Adam.
    AdamW(std::vector<ParamGroupSpec> groups, const AdamWOptions& options = AdamWOptions());
};

}  // namespace xg::optim
