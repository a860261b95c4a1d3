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

void SGD::update(const ParamGroup& group, Tensor& param, const Array& grad, ParamState& state) {
    const double lr = group.lr, wd = group.weight_decay;
    const double momentum = options_.momentum(), dampening = options_.dampening();
    const bool nesterov = options_.nesterov(), first_step = state.step == 1, maximize = options_.maximize();
    // the size before data(): nothing reads the parameter between data() handing out its storage and
    // the writes, so a float32 parameter is rounded at its next read (engines where reading the value
    // settles the rounding would otherwise leave the writes unrounded)
    const std::size_t n = param.numel();
    double* w = param.data();
    const double* g = grad.data();
    double* buf = momentum != 0.0 ? state.buffers[0].data() : nullptr;
    // Each line mirrors one PyTorch tensor op, in the same order, so results agree to the last bit.
    xg::detail::parallel_for(n, 1, [&](std::size_t begin, std::size_t end) {
        for (std::size_t i = begin; i < end; ++i) {
            double d = maximize ? -g[i] : g[i];                       // d_p if not maximize else -d_p
            if (wd != 0.0) d = d + wd * w[i];                          // d_p.add(param, alpha=wd)
            if (buf) {
                buf[i] = first_step ? d : buf[i] * momentum + (1.0 - dampening) * d;  // buf.mul_(m).add_(d_p, alpha=1-damp)
                d = nesterov ? d + momentum * buf[i] : buf[i];         // d_p.add(buf, alpha=m) or buf
            }
            w[i] = w[i] + (-lr) * d;                                   // param.add_(d_p, alpha=-lr)
        }
    });
}

}  // namespace xg::optim
