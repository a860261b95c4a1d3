// The runnable mini Pre-LN model of article 002 (example A2.6), with the article's attribute
// names so named_parameters() equals PyTorch's state_dict keys (tests/fixtures/README.md,
// case mini_model). Reusable by tutorials.
#pragma once

#include <cstddef>
#include <memory>

#include "nn/nn.hpp"

namespace xg::test {

/// fc = Sequential(Linear(d, 2d), GELU(), Linear(2d, d)); forward(x) = fc(x).
class Sublayer : public nn::Module {
public:
    explicit Sublayer(std::size_t d)
        : fc(register_module("fc", std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
                                       std::make_shared<nn::Linear>(d, d * 2), std::make_shared<nn::GELU>(),
                                       std::make_shared<nn::Linear>(d * 2, d)}))) {}
    Tensor forward(const Tensor& x) override { return fc->forward(x); }

    std::shared_ptr<nn::Sequential> fc;
};

/// forward(x) = x + sub(ln(x)). `sub` is registered before `ln`, as in the article.
class PreLNBlock : public nn::Module {
public:
    explicit PreLNBlock(std::size_t d)
        : sub(register_module("sub", std::make_shared<Sublayer>(d))),
          ln(register_module("ln", std::make_shared<nn::LayerNorm>(d))) {}
    Tensor forward(const Tensor& x) override { return x + sub->forward(ln->forward(x)); }

    std::shared_ptr<Sublayer> sub;
    std::shared_ptr<nn::LayerNorm> ln;
};

/// blocks (ModuleList of PreLNBlock), ln_f, head: forward(x) = head(ln_f(blocks(x))).
class MiniPreLNModel : public nn::Module {
public:
    MiniPreLNModel(std::size_t d, std::size_t n_layers, std::size_t vocab_size)
        : blocks(register_module("blocks", std::make_shared<nn::ModuleList>())),
          ln_f(register_module("ln_f", std::make_shared<nn::LayerNorm>(d))),
          head(register_module("head", std::make_shared<nn::Linear>(d, vocab_size))) {
        for (std::size_t i = 0; i < n_layers; ++i) blocks->push_back(std::make_shared<PreLNBlock>(d));
    }
    Tensor forward(const Tensor& x) override {
        Tensor h = x;
        for (std::size_t i = 0; i < blocks->size(); ++i) h = blocks->at<PreLNBlock>(i)->forward(h);
        return head->forward(ln_f->forward(h));
    }

    std::shared_ptr<nn::ModuleList> blocks;
    std::shared_ptr<nn::LayerNorm> ln_f;
    std::shared_ptr<nn::Linear> head;
};

}  // namespace xg::test
