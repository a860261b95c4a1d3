// Adam (L2 weight decay added to the gradient) and AdamW (decoupled weight decay):
// torch.optim.Adam / AdamW (1.13, amsgrad=False) exactly.
#pragma once

#include "optim/optimizer.hpp"

namespace xg::optim {

/// Options of Adam, e.g. `AdamOptions(3e-4).betas(0.9, 0.95).weight_decay(0.1)`.
class AdamOptions {
public:
    explicit AdamOptions(double lr = 1e-3) : lr_(lr) {}
    XG_OPTIM_ARG(AdamOptions, double, lr, 1e-3);
    XG_OPTIM_ARG(AdamOptions, double, beta1, 0.9);
    XG_OPTIM_ARG(AdamOptions, double, beta2, 0.999);
    XG_OPTIM_ARG(AdamOptions, double, eps, 1e-8);
    XG_OPTIM_ARG(AdamOptions, double, weight_decay, 0.0);

public:
    AdamOptions& betas(double b1, double b2) { return beta1(b1).beta2(b2); }
};

/// Options of AdamW: as Adam's, but weight decay defaults to 1e-2 (PyTorch's default).
class AdamWOptions {
public:
    explicit AdamWOptions(double lr = 1e-3) : lr_(lr) {}
    XG_OPTIM_ARG(AdamWOptions, double, lr, 1e-3);
    XG_OPTIM_ARG(AdamWOptions, double, beta1, 0.9);
    XG_OPTIM_ARG(AdamWOptions, double, beta2, 0.999);
    XG_OPTIM_ARG(AdamWOptions, double, eps, 1e-8);
    XG_OPTIM_ARG(AdamWOptions, double, weight_decay, 1e-2);

public:
    AdamWOptions& betas(double b1, double b2) { return beta1(b1).beta2(b2); }
    operator AdamOptions() const {
        return AdamOptions(lr()).betas(beta1(), beta2()).eps(eps()).weight_decay(weight_decay());
    }
};

/// Per step t of a parameter (m, v start at 0), with g the gradient:
///   Adam:  g += weight_decay * w             AdamW: w *= 1 - lr * weight_decay
///   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
///   w -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
class Adam : public Optimizer {
public:
    Adam(std::vector<Tensor> params, const AdamOptions& options = AdamOptions());
    Adam(std::vector<ParamGroupSpec> groups, const AdamOptions& options = AdamOptions());

    const AdamOptions& options() const { return options_; }
    std::string name() const override { return decoupled_ ? "AdamW" : "Adam"; }
    std::vector<std::string> buffer_names() const override { return {"exp_avg", "exp_avg_sq"}; }

protected:
    Adam(std::vector<ParamGroupSpec> groups, const AdamOptions& options, bool decoupled_weight_decay);
    void update(const ParamGroup& group, Tensor& param, const Array& grad, ParamState& state) override;

private:
    AdamOptions options_;
    bool decoupled_ = false;
};

class AdamW : public Adam {
public:
    AdamW(std::vector<Tensor> params, const AdamWOptions& options = AdamWOptions());
    AdamW(std::vector<ParamGroupSpec> groups, const AdamWOptions& options = AdamWOptions());
};

}  // namespace xg::optim
