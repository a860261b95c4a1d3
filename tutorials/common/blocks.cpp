#include "tutorials/common/blocks.hpp"

#include "core/ops.hpp"

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
    : pre_ln(pre_ln_), causal(causal_) {
    attn = register_module("attn", std::make_shared<nn::MultiheadAttention>(d_model, nhead));
    ffn = register_module("ffn", make_ffn(d_model, 4 * d_model));
    auto make_norm = [&]() -> std::shared_ptr<nn::Module> {
        if (rms) return std::make_shared<nn::RMSNorm>(d_model, 1e-5);
        return std::make_shared<nn::LayerNorm>(d_model);
    };
    norm1 = register_module("norm1", make_norm());
    norm2 = register_module("norm2", make_norm());
}

Tensor TransformerBlock::forward(const Tensor& x) {
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
