#include "optim/adam.hpp"

#include <cmath>
#include <type_traits>

#include <fmt/format.h>

#include "core/fast/kernel_clones.hpp"
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

namespace {

// Adam's per-step numbers in the parameter's dtype T: PyTorch's float32 Adam hands its Python
// floats (betas, 1 - beta, -step_size, sqrt(bias_correction2), eps) to float32 tensor ops, which
// round them to float once.
template <class T>
struct AdamScalars {
    T beta1, one_minus_beta1, beta2, one_minus_beta2, weight_decay, decay, neg_step_size, bias_correction2_sqrt, eps;
};

enum class Decay { none, l2, decoupled };

// Each line is one PyTorch tensor op of torch.optim.Adam / AdamW (1.13), in the same order and in
// the parameter's dtype T, as PyTorch computes a float32 parameter's step in float: so a float64
// parameter's results agree with PyTorch's to the last bit. The loop is unswitched by template
// (weight decay, AMSGrad) so that nothing branches inside it and it vectorises.
template <class T, Decay kDecay, bool kAmsgrad>
XG_KERNEL_INLINE void adam_elements(const AdamScalars<T>& s, T* w, const T* g, T* m, T* v, T* v_max, std::size_t begin,
                                    std::size_t end) {
#pragma omp simd
    for (std::size_t i = begin; i < end; ++i) {
        T wi = w[i], d = g[i];
        if constexpr (kDecay == Decay::decoupled) wi = wi * s.decay;            // param.mul_(1 - lr*wd)
        if constexpr (kDecay == Decay::l2) d = d + s.weight_decay * wi;         // grad.add(param, alpha=wd)
        const T mi = m[i] * s.beta1 + s.one_minus_beta1 * d;                    // exp_avg.mul_(b1).add_(g, alpha=1-b1)
        const T vi = v[i] * s.beta2 + s.one_minus_beta2 * d * d;                // exp_avg_sq.mul_(b2).addcmul_(g, g, value=1-b2)
        m[i] = mi;
        v[i] = vi;
        T second = vi;
        if constexpr (kAmsgrad) {
            const T previous = v_max[i];
            second = std::isnan(vi) || vi > previous ? vi : previous;           // torch.maximum(v_max, v, out=v_max)
            v_max[i] = second;
        }
        const T denom = std::sqrt(second) / s.bias_correction2_sqrt + s.eps;    // (v.sqrt() / sqrt(bc2)).add_(eps)
        w[i] = wi + s.neg_step_size * mi / denom;                               // param.addcdiv_(m, denom, value=-step_size)
    }
}

template <class T>
XG_KERNEL_INLINE void adam_range(const AdamScalars<T>& s, Decay decay, T* w, const T* g, T* m, T* v, T* v_max,
                                 std::size_t begin, std::size_t end) {
    const auto run = [&](auto decay_tag, auto amsgrad_tag) {
        adam_elements<T, decltype(decay_tag)::value, decltype(amsgrad_tag)::value>(s, w, g, m, v, v_max, begin, end);
    };
    using None = std::integral_constant<Decay, Decay::none>;
    using L2 = std::integral_constant<Decay, Decay::l2>;
    using Decoupled = std::integral_constant<Decay, Decay::decoupled>;
    if (v_max != nullptr) {
        if (decay == Decay::none) run(None{}, std::true_type{});
        else if (decay == Decay::l2) run(L2{}, std::true_type{});
        else run(Decoupled{}, std::true_type{});
    } else {
        if (decay == Decay::none) run(None{}, std::false_type{});
        else if (decay == Decay::l2) run(L2{}, std::false_type{});
        else run(Decoupled{}, std::false_type{});
    }
}

// The clones (GCC's target_clones takes no templates): one per dtype.
XG_KERNEL_CLONES void adam_span(const AdamScalars<double>& s, Decay decay, double* w, const double* g, double* m,
                                double* v, double* v_max, std::size_t begin, std::size_t end) {
    adam_range(s, decay, w, g, m, v, v_max, begin, end);
}
XG_KERNEL_CLONES void adam_span(const AdamScalars<float>& s, Decay decay, float* w, const float* g, float* m,
                                float* v, float* v_max, std::size_t begin, std::size_t end) {
    adam_range(s, decay, w, g, m, v, v_max, begin, end);
}

}  // namespace

// T is the storage and the arithmetic: a float32 parameter is stepped in float, op by op as
// PyTorch's float32 Adam (docs/precision.md, "Optimizers": the error against float64 arithmetic on
// the same values is bounded in tests/optim/test_optim_float32.cpp).
template <class T>
void Adam::apply(const ParamGroup& group, const UpdateSpan<T>& span) const {
    const double lr = group.lr, wd = group.weight_decay;
    const double beta1 = options_.beta1(), beta2 = options_.beta2();
    const double t = static_cast<double>(span.step);
    const double bias_correction1 = 1.0 - std::pow(beta1, t);
    const double bias_correction2 = 1.0 - std::pow(beta2, t);
    const AdamScalars<T> s{static_cast<T>(beta1),
                           static_cast<T>(1.0 - beta1),
                           static_cast<T>(beta2),
                           static_cast<T>(1.0 - beta2),
                           static_cast<T>(wd),
                           static_cast<T>(1.0 - lr * wd),
                           static_cast<T>(-(lr / bias_correction1)),
                           static_cast<T>(std::sqrt(bias_correction2)),
                           static_cast<T>(options_.eps())};
    const Decay decay = wd == 0.0 ? Decay::none : decoupled_ ? Decay::decoupled : Decay::l2;
    T* v_max = options_.amsgrad() ? span.buffers[2] : nullptr;
    xg::detail::parallel_for(span.size, 1, [&](std::size_t begin, std::size_t end) {
        adam_span(s, decay, span.param, span.grad, span.buffers[0], span.buffers[1], v_max, begin, end);
    });
}

}  // namespace xg::optim
