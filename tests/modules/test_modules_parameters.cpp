// A module's parameter members stay the tensors its registry, its state_dict and the optimizer
// hold (issue 13, bug 2): assigning to `lin.weight` copies values in instead of silently
// detaching the member; Module::replace_parameter is the one explicit way to put another tensor
// (e.g. a tied weight) in a parameter's place.
#include <memory>

#include <catch2/catch.hpp>

#include "nn/nn.hpp"
#include "optim/sgd.hpp"

namespace xg_test_modules_parameters {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using Catch::Contains;

namespace {

const Array& saved(const NamedArrays& state, const std::string& key) {
    for (const auto& entry : state) {
        if (entry.first == key) return entry.second;
    }
    FAIL("no key " << key);
    static const Array none;
    return none;
}

}  // namespace

TEST_CASE("assigning to a parameter member keeps it registered: the optimizer trains it, state_dict saves it", "[nn][parameters]") {
    nn::Linear lin(2, 1);
    optim::SGD opt(lin.parameters(), optim::SGDOptions(0.1));
    lin.weight = Tensor({{1.0, 2.0}});
    lin.bias = Tensor({0.5});
    CHECK(saved(lin.state_dict(), "weight") == Array{{1.0, 2.0}});
    CHECK(saved(lin.state_dict(), "bias") == Array{0.5});

    // y = x w^T + b = 3.5 for x = (1, 1); dy/dw = x, dy/db = 1; one SGD step with lr 0.1.
    Tensor y = sum(lin.forward(Tensor({{1.0, 1.0}})));
    CHECK(y.item() == 3.5);
    y.backward();
    opt.step();
    CHECK(lin.weight.value() == Array{{0.9, 1.9}});
    CHECK(lin.bias.value() == Array{0.4});
    CHECK(saved(lin.state_dict(), "weight") == Array{{0.9, 1.9}});
}

TEST_CASE("parameter assignment copies values, checks shapes and refuses absent parameters", "[nn][parameters]") {
    nn::Linear a(2, 2), b(2, 2), no_bias(2, 2, false);
    const Node* node = a.weight.node().get();
    a.weight = b.weight;  // values, not the tensor: the two stay independent
    CHECK(a.weight.node().get() == node);
    CHECK(a.weight.value() == b.weight.value());
    b.weight.mutable_value().fill(7.0);
    CHECK(a.weight.value()(0, 0) != 7.0);
    CHECK(a.weight.requires_grad());
    CHECK(a.weight.name() == "weight");

    CHECK_THROWS_WITH(a.weight = zeros({3, 2}),
                      Contains("Parameter: cannot assign a tensor of shape (3, 2) to parameter 'weight' of shape (2, 2)") &&
                          Contains("replace_parameter"));
    CHECK_THROWS_WITH(no_bias.bias = zeros({2}), Contains("cannot assign to an undefined parameter"));
    CHECK_THROWS_WITH(a.bias = Tensor(), Contains("cannot assign an undefined tensor to parameter 'bias'"));
    CHECK(no_bias.parameters().size() == 1);
}

TEST_CASE("assigning to a parameter a pending backward reads makes that backward throw", "[nn][parameters][versions]") {
    nn::Linear lin(3, 2);
    Tensor x = randn({4, 3}).requires_grad_();
    Tensor loss = sum(lin.forward(x));
    lin.weight = zeros({2, 3});
    CHECK_THROWS_WITH(loss.backward(), Contains("modified by an inplace operation") && Contains("input 1 of 'linear'"));
}

TEST_CASE("replace_parameter puts another tensor in place, in the registry and the member: weight tying", "[nn][parameters]") {
    struct Tied : nn::Module {
        Tied() {
            emb = register_module("emb", std::make_shared<nn::Embedding>(5, 3));
            head = register_module("head", std::make_shared<nn::Linear>(3, 5, false));
            head->replace_parameter("weight", emb->weight);
        }
        std::shared_ptr<nn::Embedding> emb;
        std::shared_ptr<nn::Linear> head;
    };
    Tied m;
    CHECK(m.head->weight.node() == m.emb->weight.node());
    CHECK(m.head->parameters()[0].node() == m.emb->weight.node());
    CHECK(m.parameters().size() == 1);  // listed once, so an optimizer steps it once
    CHECK(m.state_dict().size() == 2);  // saved under both names, as PyTorch does

    // Both uses feed one gradient: d/dW sum(head(emb(i))) = one-hot rows + outer products.
    Tensor h = m.emb->forward(IndexArray{1});
    sum(m.head->forward(h)).backward();
    CHECK(m.emb->weight.has_grad());

    nn::Linear lin(2, 3);
    CHECK_THROWS_WITH(lin.replace_parameter("weights", zeros({3, 2})),
                      Contains("no parameter named 'weights' (this module has: weight, bias)"));
    CHECK_THROWS_WITH(lin.replace_parameter("weight", zeros({2, 3})), Contains("'weight' has shape (3, 2) but the replacement has shape (2, 3)"));
    CHECK_THROWS_WITH(lin.replace_parameter("weight", zeros({3, 2}, true) * 2.0), Contains("must be replaced by a leaf tensor"));
    Tensor frozen = zeros({3});
    lin.replace_parameter("bias", frozen);
    CHECK(frozen.requires_grad());  // takes over the replaced parameter's requires_grad
    CHECK(lin.bias.node() == frozen.node());
}

TEST_CASE("a Parameter member is bound once", "[nn][parameters]") {
    struct Twice : nn::Module {
        nn::Parameter w;
        void bind_again() {
            register_parameter("w", w, zeros({1}));
            register_parameter("v", w, zeros({1}));
        }
    };
    Twice m;
    CHECK_THROWS_WITH(m.bind_again(), Contains("cannot register parameter 'v': its member already holds parameter 'w'"));
}

TEST_CASE("every built-in layer holds its parameters as Parameters, the recurrent layers' all_weights too", "[nn][parameters]") {
    nn::Conv2d conv(2, 3, 3);
    optim::SGD opt(conv.parameters(), optim::SGDOptions(0.1));
    conv.weight = zeros({3, 2, 3, 3});
    CHECK(saved(conv.state_dict(), "weight") == Array(xt::zeros<double>({3, 2, 3, 3})));
    CHECK(conv.parameters()[0].node() == conv.weight.node());

    nn::LSTM lstm(3, 2, 2);
    lstm.all_weights[1].weight_hh = ones({8, 2});
    CHECK(saved(lstm.state_dict(), "weight_hh_l1") == Array(xt::ones<double>({8, 2})));
    const Tensor replacement = zeros({8, 3});
    lstm.replace_parameter("weight_ih_l0", replacement);
    CHECK(lstm.all_weights[0].weight_ih.node() == replacement.node());  // the member follows

    nn::LayerNormLSTMCell cell(3, 2);
    const Tensor gain = ones({2});
    cell.replace_parameter("layernorm_c.weight", gain);  // dotted names reach into children
    CHECK(cell.layernorm_c->weight.node() == gain.node());
    CHECK_THROWS_WITH(cell.replace_parameter("layernorm_x.weight", gain), Contains("no submodule named 'layernorm_x'"));
}

}  // namespace xg_test_modules_parameters
