#include "optim/sgd.hpp"

#include <cmath>

#include <fmt/format.h>

#include "core/fast/parallel.hpp"

namespace xg::optim {

namespace {

const SGDOptions& checked(const SGDOptions& o) {
    if (!(o.momentum() >= 0.0)) fail("SGD", fmt::format("invalid momentum {}", o.momentum()));
    if (!std::isfinite(o.dampening())) fail("SGD", fmt::format("invalid dampening {}", o.dampening()));
    // PyTorch's rule: Nesterov needs momentum and no dampening.
    if (o.nesterov() && (o.momentum() <= 0.0 || o.dampening() != 0.0)) {
        fail("SGD", fmt::format("nesterov momentum requires momentum > 0 and dampening = 0 (got momentum {}, dampening {})",
                                o.momentum(), o.dampening()));
    }
    return o;
}

}  // namespace

SGD::SGD(std::vector<Tensor> params, const SGDOptions& options) : SGD(single_group(std::move(params)), options) {}

SGD::SGD(std::vector<ParamGroupSpec> groups, const SGDOptions& options)
    : Optimizer(std::move(groups), options.lr(), options.weight_decay()), options_(checked(options)) {}

std::vector<std::string> SGD::buffer_names() const {
    if (options_.momentum() == 0.0) return {};
    return {"momentum_buffer"};
}

void SGD::update(const ParamGroup& group, const UpdateSpan<double>& span) { apply(group, span); }
void SGD::update(const ParamGroup& group, const UpdateSpan<float>& span) { apply(group, span); }

// T is the storage (double, or float for a float32 parameter): every element is loaded into a
// double, updated in double and stored once, so a float32 parameter takes exactly the float64
// arithmetic rounded at each store (docs/precision.md) - what the float64-storage path computed.
template <class T>
void SGD::apply(const ParamGroup& group, const UpdateSpan<T>& span) const {
    const double lr = group.lr, wd = group.weight_decay;
    const double momentum = options_.momentum(), dampening = options_.dampening();
    const bool nesterov = options_.nesterov(), first_step = span.step == 1, maximize = options_.maximize();
    T* w = span.param;
    const T* g = span.grad;
    T* buf = momentum != 0.0 ? span.buffers[0] : nullptr;
    // Each line mirrors one PyTorch tensor op, in the same order, so results agree to the last bit.
    xg::detail::parallel_for(span.size, 1, [&](std::size_t begin, std::size_t end) {
        for (std::size_t i = begin; i < end; ++i) {
            const double wi = w[i];
            double d = maximize ? -double(g[i]) : double(g[i]);       // d_p if not maximize else -d_p
            if (wd != 0.0) d = d + wd * wi;                            // d_p.add(param, alpha=wd)
            if (buf) {
                const double b = first_step ? d : double(buf[i]) * momentum + (1.0 - dampening) * d;  // buf.mul_(m).add_(d_p, alpha=1-damp)
                buf[i] = static_cast<T>(b);
                d = nesterov ? d + momentum * b : b;                   // d_p.add(buf, alpha=m) or buf
            }
            w[i] = static_cast<T>(wi + (-lr) * d);                     // param.add_(d_p, alpha=-lr)
        }
    });
}

}  // namespace xg::optim
