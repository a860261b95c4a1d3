#include "tutorials/common/blocks.hpp"

#include <cmath>

#include <xtensor/xview.hpp>

#include "core/ops/ops.hpp"

namespace tutorial_values {

using namespace xg;

Sublayer::Sublayer(std::size_t d) {
    fc = register_module("fc", std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
                                   std::make_shared<nn::Linear>(d, 2 * d), std::make_shared<nn::GELU>(),
                                   std::make_shared<nn::Linear>(2 * d, d)}));
}

PostLNBlock::PostLNBlock(std::size_t d) {
    sub = register_module("sub", std::make_shared<Sublayer>(d));
    ln = register_module("ln", std::make_shared<nn::LayerNorm>(d));
}

Tensor PostLNBlock::forward(const Tensor& x) { return ln->forward(x + sub->forward(x)); }

PreLNBlock::PreLNBlock(std::size_t d) {
    sub = register_module("sub", std::make_shared<Sublayer>(d));
    ln = register_module("ln", std::make_shared<nn::LayerNorm>(d));
}

Tensor PreLNBlock::forward(const Tensor& x) { return x + sub->forward(ln->forward(x)); }

MiniPreLNModel::MiniPreLNModel(std::size_t d, std::size_t n_layers, std::size_t vocab_size, bool use_ln_f_)
    : use_ln_f(use_ln_f_) {
    blocks = register_module("blocks", std::make_shared<nn::ModuleList>());
    for (std::size_t i = 0; i < n_layers; ++i) blocks->push_back(std::make_shared<PreLNBlock>(d));
    ln_f = register_module("ln_f", std::make_shared<nn::LayerNorm>(d));
    head = register_module("head", std::make_shared<nn::Linear>(d, vocab_size));
}

Tensor MiniPreLNModel::forward(const Tensor& x) {
    Tensor h = x;
    for (std::size_t i = 0; i < blocks->size(); ++i) h = (*blocks)[i]->forward(h);
    if (use_ln_f) h = ln_f->forward(h);  // A2.5: normalise the residual stream before the head
    return head->forward(h);
}

std::shared_ptr<nn::Sequential> make_ffn(std::size_t d, std::size_t hidden) {
    return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(d, hidden), std::make_shared<nn::GELU>(), std::make_shared<nn::Linear>(hidden, d)});
}

TransformerBlock::TransformerBlock(std::size_t d_model, std::size_t nhead, bool pre_ln_, bool causal_, bool rms)
    : TransformerBlock(d_model, nhead, pre_ln_, causal_, rms ? NormKind::rms_norm : NormKind::layer_norm, false) {}

TransformerBlock::TransformerBlock(std::size_t d_model, std::size_t nhead, bool pre_ln_, bool causal_, NormKind norm, bool qk_norm)
    : pre_ln(pre_ln_), causal(causal_), placement(pre_ln_ ? NormPlacement::pre : NormPlacement::post) {
    const auto E = static_cast<std::int64_t>(d_model), H = static_cast<std::int64_t>(nhead);
    attn = register_module("attn", std::make_shared<nn::MultiheadAttention>(nn::MultiheadAttentionOptions(E, H).qk_norm(qk_norm)));
    ffn = register_module("ffn", make_ffn(d_model, 4 * d_model));
    norm1 = register_module("norm1", make_norm(norm, d_model));
    norm2 = register_module("norm2", make_norm(norm, d_model));
}

Tensor MeanProjection::forward(const Tensor& x) { return x - mean(x, {-1}, true); }

Tensor SphereScaling::forward(const Tensor& x) {
    const double d = static_cast<double>(x.shape().back());
    return x * std::sqrt(d) / sqrt(sum(x * x, {-1}, true) + d * eps);  // LayerNorm's rstd when mean(x) = 0
}

std::string placement_name(NormPlacement placement) {
    switch (placement) {
        case NormPlacement::post: return "Post-LN";
        case NormPlacement::pre: return "Pre-LN";
        case NormPlacement::peri: return "Peri-LN";
        case NormPlacement::deepnorm: return "DeepNorm";
        case NormPlacement::pre_lns: return "Pre-LN+LNS";
    }
    fail("placement_name", "unknown NormPlacement");
}

TransformerBlock::TransformerBlock(std::size_t d_model, std::size_t nhead, NormPlacement placement_, std::size_t layer,
                                   std::size_t n_layers, bool causal_, NormKind norm)
    : TransformerBlock(d_model, nhead, placement_ != NormPlacement::post && placement_ != NormPlacement::deepnorm, causal_,
                       norm, false) {
    if (layer < 1 || layer > n_layers) {
        fail("TransformerBlock", "layer " + std::to_string(layer) + " is not in 1.." + std::to_string(n_layers));
    }
    placement = placement_;
    if (placement == NormPlacement::peri) {
        norm1_out = register_module("norm1_out", make_norm(norm, d_model));
        norm2_out = register_module("norm2_out", make_norm(norm, d_model));
    }
    if (placement == NormPlacement::pre_lns) norm_scale = 1.0 / std::sqrt(static_cast<double>(layer));
    if (placement == NormPlacement::deepnorm) {
        const auto L = static_cast<double>(n_layers);
        residual_weight = std::pow(2.0 * L, 0.25);
        const double beta = std::pow(8.0 * L, -0.25);
        // DeepNet's beta scales the FFN, the value and the output projections, not the queries
        // and keys (the attention pattern does not grow the residual).
        const std::size_t E = d_model;
        auto values = xt::view(attn->in_proj_weight.mutable_value(), xt::range(2 * E, 3 * E), xt::all());
        values *= beta;
        attn->out_proj->weight.mutable_value() *= beta;
        for (std::size_t i : {std::size_t{0}, std::size_t{2}}) {
            std::dynamic_pointer_cast<nn::Linear>((*ffn)[i])->weight.mutable_value() *= beta;
        }
    }
}

std::shared_ptr<nn::Module> make_norm(NormKind kind, std::size_t d) {
    switch (kind) {
        case NormKind::layer_norm: return std::make_shared<nn::LayerNorm>(d);
        case NormKind::rms_norm: return std::make_shared<nn::RMSNorm>(d, 1e-5);
        case NormKind::dyt: return std::make_shared<nn::DyT>(static_cast<std::int64_t>(d));
        case NormKind::detach_mean: return std::make_shared<DetachedLayerNorm>(d, true, false);
        case NormKind::detach_var: return std::make_shared<DetachedLayerNorm>(d, false, true);
        case NormKind::detach_both: return std::make_shared<DetachedLayerNorm>(d, true, true);
        case NormKind::none: return std::make_shared<NoNorm>();
    }
    fail("make_norm", "unknown NormKind");
}

DetachedLayerNorm::DetachedLayerNorm(std::size_t d, bool detach_mean_, bool detach_var_, double eps_)
    : detach_mean(detach_mean_), detach_var(detach_var_), eps(eps_) {
    register_parameter("weight", weight, ones({d}));
    register_parameter("bias", bias, zeros({d}));
}

Tensor DetachedLayerNorm::forward(const Tensor& x) {
    Tensor mu = mean(x, {-1}, true);
    if (detach_mean) mu = mu.detach();  // x - mu still depends on x, but not through mu
    const Tensor centred = x - mu;
    Tensor sigma = sqrt(mean(centred * centred, {-1}, true) + eps);
    if (detach_var) sigma = sigma.detach();  // the scale sigma becomes a constant in backward
    return weight * (centred / sigma) + bias;
}

std::string DetachedLayerNorm::extra_repr() const {
    return "(" + std::to_string(weight.size(0)) + ",), detach_mean=" + (detach_mean ? "true" : "false") +
           ", detach_var=" + (detach_var ? "true" : "false");
}

Tensor TransformerBlock::forward(const Tensor& x) {
    if (placement == NormPlacement::peri) {  // x + N_out(F(N(x)))
        const Tensor h = norm1->forward(x);
        const Tensor y = x + norm1_out->forward(attn->forward(h, h, h, causal));
        return y + norm2_out->forward(ffn->forward(norm2->forward(y)));
    }
    if (placement == NormPlacement::pre_lns) {  // x + F(N(x) / sqrt(l))
        const Tensor h = norm1->forward(x) * norm_scale;
        const Tensor y = x + attn->forward(h, h, h, causal);
        return y + ffn->forward(norm2->forward(y) * norm_scale);
    }
    if (placement == NormPlacement::deepnorm) {  // N(alpha x + F(x))
        const Tensor y = norm1->forward(x * residual_weight + attn->forward(x, x, x, causal));
        return norm2->forward(y * residual_weight + ffn->forward(y));
    }
    if (pre_ln) {
        const Tensor h = norm1->forward(x);
        const Tensor y = x + attn->forward(h, h, h, causal);
        return y + ffn->forward(norm2->forward(y));
    }
    const Tensor y = norm1->forward(x + attn->forward(x, x, x, causal));
    return norm2->forward(y + ffn->forward(y));
}

void TransformerBlock::zero_init_residual() {
    auto zero = [](Tensor t) {
        if (t.defined()) t.mutable_value().fill(0.0);
    };
    zero(attn->out_proj->weight);
    zero(attn->out_proj->bias);
    auto last = std::dynamic_pointer_cast<nn::Linear>((*ffn)[2]);
    zero(last->weight);
    zero(last->bias);
}

Tensor LazyLayerNorm::forward(const Tensor& x) {
    if (!built()) {  // build(input_shape): the parameters take the shape of the last axis
        const std::size_t h = x.shape().back();
        register_parameter("gamma", gamma, ones({h}));
        register_parameter("beta", beta, zeros({h}));
    }
    if (x.shape().back() != gamma.size(0)) {
        fail("LazyLayerNorm", "built for last axis " + std::to_string(gamma.size(0)) + ", got input " + shape_str(x.shape()));
    }
    const Tensor mu = mean(x, {-1}, true);
    const Tensor variance = mean(pow(x - mu, 2.0), {-1}, true);  // the article's reduce_mean(square(x - mean))
    return gamma * ((x - mu) / sqrt(variance + eps)) + beta;
}

ScaleNorm::ScaleNorm(double g0, double eps_) : eps(eps_) { register_parameter("g", g, scalar(g0)); }

Tensor ScaleNorm::forward(const Tensor& x) {
    const Tensor norm = sqrt(sum(x * x, {-1}, true) + eps);
    return g * x / norm;
}

DeepNormBlock::DeepNormBlock(std::size_t d, double alpha_) : alpha(alpha_) {
    sub = register_module("sub", std::make_shared<Sublayer>(d));
    ln = register_module("ln", std::make_shared<nn::LayerNorm>(d));
}

Tensor DeepNormBlock::forward(const Tensor& x) { return ln->forward(x * alpha + sub->forward(x)); }

}  // namespace tutorial_values
