#include "optim/adam.hpp"

#include <cmath>

#include <fmt/format.h>

#include "core/fast/parallel.hpp"

namespace xg::optim {

namespace {

const AdamOptions& checked(const AdamOptions& o, const char* op) {
    if (!(o.beta1() >= 0.0 && o.beta1() < 1.0)) fail(op, fmt::format("invalid beta1 {} (need 0 <= beta1 < 1)", o.beta1()));
    if (!(o.beta2() >= 0.0 && o.beta2() < 1.0)) fail(op, fmt::format("invalid beta2 {} (need 0 <= beta2 < 1)", o.beta2()));
    if (!(o.eps() >= 0.0) || !std::isfinite(o.eps())) fail(op, fmt::format("invalid eps {}", o.eps()));
    return o;
}

}  // namespace

Adam::Adam(std::vector<Tensor> params, const AdamOptions& options) : Adam(single_group(std::move(params)), options, false) {}
Adam::Adam(std::vector<ParamGroupSpec> groups, const AdamOptions& options) : Adam(std::move(groups), options, false) {}
Adam::Adam(std::vector<ParamGroupSpec> groups, const AdamOptions& options, bool decoupled_weight_decay)
    : Optimizer(std::move(groups), options.lr(), options.weight_decay()),
      options_(checked(options, decoupled_weight_decay ? "AdamW" : "Adam")),
      decoupled_(decoupled_weight_decay) {}

AdamW::AdamW(std::vector<Tensor> params, const AdamWOptions& options) : Adam(single_group(std::move(params)), options, true) {}
AdamW::AdamW(std::vector<ParamGroupSpec> groups, const AdamWOptions& options) : Adam(std::move(groups), options, true) {}

void Adam::update(const ParamGroup& group, const UpdateSpan<double>& span) { apply(group, span); }
void Adam::update(const ParamGroup& group, const UpdateSpan<float>& span) { apply(group, span); }

// T is the storage (double, or float for a float32 parameter): every element is loaded into a
// double, updated in double and stored once, so a float32 parameter takes exactly the float64
// arithmetic rounded at each store (docs/precision.md) - what the float64-storage path computed.
template <class T>
void Adam::apply(const ParamGroup& group, const UpdateSpan<T>& span) const {
    const double lr = group.lr, wd = group.weight_decay;
    const double beta1 = options_.beta1(), beta2 = options_.beta2(), eps = options_.eps();
    const double t = static_cast<double>(span.step);
    const double bias_correction1 = 1.0 - std::pow(beta1, t);
    const double bias_correction2 = 1.0 - std::pow(beta2, t);
    const double step_size = lr / bias_correction1;
    const double bias_correction2_sqrt = std::sqrt(bias_correction2);
    const double decay = 1.0 - lr * wd;
    T* w = span.param;
    const T* g = span.grad;
    T* m = span.buffers[0];
    T* v = span.buffers[1];
    T* v_max = options_.amsgrad() ? span.buffers[2] : nullptr;
    // Each line mirrors one PyTorch tensor op, in the same order, so results agree to the last bit.
    xg::detail::parallel_for(span.size, 1, [&](std::size_t begin, std::size_t end) {
        for (std::size_t i = begin; i < end; ++i) {
            double wi = w[i], d = g[i];
            if (wd != 0.0) {
                if (decoupled_) wi = wi * decay;                                 // param.mul_(1 - lr*wd)
                else d = d + wd * wi;                                            // grad.add(param, alpha=wd)
            }
            const double mi = double(m[i]) * beta1 + (1.0 - beta1) * d;          // exp_avg.mul_(b1).add_(g, alpha=1-b1)
            const double vi = double(v[i]) * beta2 + (1.0 - beta2) * d * d;      // exp_avg_sq.mul_(b2).addcmul_(g, g, value=1-b2)
            m[i] = static_cast<T>(mi);
            v[i] = static_cast<T>(vi);
            double second = vi;
            if (v_max) {
                const double previous = v_max[i];
                second = std::isnan(vi) || vi > previous ? vi : previous;        // torch.maximum(v_max, v, out=v_max)
                v_max[i] = static_cast<T>(second);
            }
            const double denom = std::sqrt(second) / bias_correction2_sqrt + eps; // (v.sqrt() / sqrt(bc2)).add_(eps)
            w[i] = static_cast<T>(wi + (-step_size) * mi / denom);              // param.addcdiv_(m, denom, value=-step_size)
        }
    });
}

}  // namespace xg::optim
