// Stochastic gradient descent with optional momentum, dampening, Nesterov and L2 weight decay:
// torch.optim.SGD (1.13) exactly.
#pragma once

#include "core/engine/arg.hpp"
#include "optim/optimizer.hpp"

namespace xg::optim {

/// Options of SGD, e.g. `SGDOptions(0.1).momentum(0.9).nesterov(true)`.
class SGDOptions {
public:
    /// SGD with learning rate `lr` (no default, as torch.optim.SGD).
    explicit SGDOptions(double lr) : lr_(lr) {}
    /// Learning rate; lr() reads it.
    XG_ARG(SGDOptions, double, lr, 0.0);
    /// Momentum factor, >= 0 (default 0: plain SGD).
    XG_ARG(SGDOptions, double, momentum, 0.0);
    /// Dampening of the momentum buffer's new gradient (default 0).
    XG_ARG(SGDOptions, double, dampening, 0.0);
    /// L2 penalty added to the gradient (default 0).
    XG_ARG(SGDOptions, double, weight_decay, 0.0);
    /// Nesterov momentum; needs momentum > 0 and dampening 0 (default false).
    XG_ARG(SGDOptions, bool, nesterov, false);
    /// Ascend instead of descend: the update uses -gradient (default false).
    XG_ARG(SGDOptions, bool, maximize, false);
};

/// Per step, with g the gradient:
///   if maximize: g = -g;
///   g += weight_decay * w;
///   if momentum: buf = g on a parameter's first step, else buf = momentum * buf + (1 - dampening) * g;
///                g = nesterov ? g + momentum * buf : buf;
///   w -= lr * g.
class SGD : public Optimizer {
public:
    /// One group of `params`. Throws xg::Error for a negative momentum, nesterov without momentum or
    /// with dampening, an invalid lr, or a parameter that is undefined, not a leaf or listed twice.
    SGD(std::vector<Tensor> params, const SGDOptions& options);
    /// Several groups; a group's unset lr / weight_decay take `options`' values. Errors as above.
    SGD(std::vector<ParamGroupSpec> groups, const SGDOptions& options);

    /// The defaults given at construction.
    const SGDOptions& options() const { return options_; }
    std::string name() const override { return "SGD"; }
    std::vector<std::string> buffer_names() const override;

protected:
    void update(const ParamGroup& group, const UpdateSpan<double>& span) override;
    void update(const ParamGroup& group, const UpdateSpan<float>& span) override;

private:
    template <class T>
    void apply(const ParamGroup& group, const UpdateSpan<T>& span) const;
    SGDOptions options_;
};

}  // namespace xg::optim
