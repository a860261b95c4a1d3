// Stochastic gradient descent with optional momentum, dampening, Nesterov and L2 weight decay:
// torch.optim.SGD (1.13) exactly.
#pragma once

#include "optim/optimizer.hpp"

namespace xg::optim {

/// Options of SGD, e.g. `SGDOptions(0.1).momentum(0.9).nesterov(true)`.
class SGDOptions {
public:
    explicit SGDOptions(double lr) : lr_(lr) {}
    XG_OPTIM_ARG(SGDOptions, double, lr, 0.0);
    XG_OPTIM_ARG(SGDOptions, double, momentum, 0.0);
    XG_OPTIM_ARG(SGDOptions, double, dampening, 0.0);
    XG_OPTIM_ARG(SGDOptions, double, weight_decay, 0.0);
    XG_OPTIM_ARG(SGDOptions, bool, nesterov, false);
};

/// Per step, with g the gradient:
///   g += weight_decay * w;
///   if momentum: buf = g on a parameter's first step, else buf = momentum * buf + (1 - dampening) * g;
///                g = nesterov ? g + momentum * buf : buf;
///   w -= lr * g.
class SGD : public Optimizer {
public:
    SGD(std::vector<Tensor> params, const SGDOptions& options);
    SGD(std::vector<ParamGroupSpec> groups, const SGDOptions& options);

    const SGDOptions& options() const { return options_; }
    std::string name() const override { return "SGD"; }
    std::vector<std::string> buffer_names() const override;

protected:
    void update(const ParamGroup& group, Tensor& param, const Array& grad, ParamState& state) override;

private:
    SGDOptions options_;
};

}  // namespace xg::optim
