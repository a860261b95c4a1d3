// The mini Pre-LN model of article 002 (A2.6) as the library's tests build it: blocks -> ln_f ->
// head, each block x + F(LN(x)) with F = Linear(d, 2d) -> GELU -> Linear(2d, d). The attribute
// names are the article's, so PyTorch's state_dict (tests/fixtures/mini_model) loads directly.
// tutorials/common/blocks.hpp defines the same model for the tutorials; the library's tests do
// not include tutorial code (tests/layout/dependencies.cmake), so they keep this copy.
#pragma once

#include <cstddef>
#include <memory>

#include "nn/nn.hpp"

namespace xg::test {

/// F(x): Linear(d, 2d) -> GELU -> Linear(2d, d), attribute `fc`.
class Sublayer : public nn::Module {
public:
    explicit Sublayer(std::size_t d) {
        fc = register_module("fc", std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
                                       std::make_shared<nn::Linear>(d, 2 * d), std::make_shared<nn::GELU>(),
                                       std::make_shared<nn::Linear>(2 * d, d)}));
    }
    Tensor forward(const Tensor& x) override { return fc->forward(x); }
    std::shared_ptr<nn::Sequential> fc;
};

/// y = x + F(LN(x)).
class PreLNBlock : public nn::Module {
public:
    explicit PreLNBlock(std::size_t d) {
        sub = register_module("sub", std::make_shared<Sublayer>(d));
        ln = register_module("ln", std::make_shared<nn::LayerNorm>(d));
    }
    Tensor forward(const Tensor& x) override { return x + sub->forward(ln->forward(x)); }
    std::shared_ptr<Sublayer> sub;
    std::shared_ptr<nn::LayerNorm> ln;
};

/// blocks -> ln_f -> head (x is already embedded: (B, T, d)).
class MiniPreLNModel : public nn::Module {
public:
    MiniPreLNModel(std::size_t d, std::size_t n_layers, std::size_t vocab_size) {
        blocks = register_module("blocks", std::make_shared<nn::ModuleList>());
        for (std::size_t i = 0; i < n_layers; ++i) blocks->push_back(std::make_shared<PreLNBlock>(d));
        ln_f = register_module("ln_f", std::make_shared<nn::LayerNorm>(d));
        head = register_module("head", std::make_shared<nn::Linear>(d, vocab_size));
    }
    Tensor forward(const Tensor& x) override {
        Tensor h = x;
        for (std::size_t i = 0; i < blocks->size(); ++i) h = (*blocks)[i]->forward(h);
        return head->forward(ln_f->forward(h));
    }
    std::shared_ptr<nn::ModuleList> blocks;
    std::shared_ptr<nn::LayerNorm> ln_f;
    std::shared_ptr<nn::Linear> head;
};

}  // namespace xg::test
