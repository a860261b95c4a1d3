// Version counters: a value that a backward reads must not have changed in place since the
// forward used it (issue 13, bug 1). PyTorch raises "one of the variables needed for gradient
// computation has been modified by an inplace operation"; xgrad raises xg::Error naming the op
// and the tensor. Values a backward never reads (add's inputs) may change freely, as in PyTorch,
// and the optimizer's own updates after backward stay legal.
#include <memory>

#include <catch2/catch.hpp>

#include "core/ops/ops.hpp"
#include "nn/nn.hpp"
#include "optim/sgd.hpp"

namespace xg_test_engine_versions {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using Catch::Contains;

TEST_CASE("a leaf changed in place after the forward used it stops backward", "[graph][versions]") {
    // The example: without the check x.grad would be [10, 20, 30] instead of [1, 2, 3].
    Tensor x(Array{1.0, 2.0, 3.0}, true);
    Tensor w(Array{1.0, 2.0, 3.0});
    w.requires_grad_();
    Tensor y = sum(x * w);
    w.mutable_value() *= 10.0;
    CHECK_THROWS_WITH(y.backward(), Contains("backward of 'mul'") &&
                                        Contains("modified by an inplace operation") &&
                                        Contains("input 1 of 'mul' (a leaf of shape (3,)) was changed in place "
                                                 "after the forward of 'mul' used it"));
    CHECK_FALSE(x.has_grad());  // nothing was accumulated from the stale value

    // Recomputing the forward after the change is the fix, and gives the right gradient.
    Tensor again = sum(x * w);
    again.backward();
    CHECK(x.grad_value() == Array{10.0, 20.0, 30.0});
}

TEST_CASE("every in-place path bumps the version: mutable_value, data, load_state_dict, init", "[graph][versions]") {
    // A version is the tick of a process-wide counter: it only grows, and each change moves it.
    Tensor t(Array{1.0, 2.0});
    const auto version = [](const Tensor& x) { return x.node()->version; };
    CHECK(version(t) == 0);
    t.mutable_value();
    const std::uint64_t first = version(t);
    CHECK(first > 0);
    t.data()[0] = 5.0;
    const std::uint64_t second = version(t);
    CHECK(second > first);
    // Reads never move it.
    (void)t.value();
    (void)static_cast<const Tensor&>(t).data();
    (void)t(1);
    CHECK(version(t) == second);

    nn::Linear lin(2, 2);
    std::uint64_t before = version(lin.weight);
    lin.load_state_dict(lin.state_dict());
    CHECK(version(lin.weight) > before);
    before = version(lin.weight);
    nn::init::zeros_(lin.weight);
    CHECK(version(lin.weight) > before);
}

TEST_CASE("an optimizer step between a forward and a retain_graph backward stops that backward", "[graph][versions]") {
    manual_seed(3);
    nn::Sequential net{std::make_shared<nn::Linear>(3, 4), std::make_shared<nn::Linear>(4, 1)};
    optim::SGD opt(net.parameters(), optim::SGDOptions(0.1));
    const Tensor x = randn({5, 3});
    Tensor loss = mean(net.forward(x));
    loss.backward(BackwardOptions{true});
    opt.step();  // changes every weight the retained graph would read again
    // The second layer's weight (1, 4) is the first changed value the walk reads.
    CHECK_THROWS_WITH(loss.backward(), Contains("backward of 'linear'") && Contains("modified by an inplace operation") &&
                                           Contains("input 1 of 'linear' (a leaf of shape (1, 4)) was changed in place"));

    // The ordinary loop - forward, backward, step, forward again - is legal: each forward
    // records the versions it sees.
    for (int step = 0; step < 3; ++step) {
        opt.zero_grad();
        Tensor l = mean(net.forward(x));
        l.backward();
        opt.step();
    }
}

TEST_CASE("an op's saved output changed in place stops backward", "[graph][versions]") {
    Tensor x(Array{0.5, -1.0, 2.0}, true);
    Tensor y = tanh(x);
    y.mutable_value() *= 0.0;
    CHECK_THROWS_WITH(sum(y).backward(), Contains("backward of 'tanh'") && Contains("the output of 'tanh' (shape (3,))") &&
                                             Contains("modified by an inplace operation"));

    // The same for an input that is itself an op's result: named by the op that made it.
    Tensor a(Array{1.0, 2.0}, true);
    Tensor e = exp(a);
    Tensor z = sum(e * a);
    e.mutable_value() *= 2.0;
    CHECK_THROWS_WITH(z.backward(), Contains("input 0 of 'mul' (the output of 'exp', shape (2,))"));
}

TEST_CASE("a value no backward reads may change, as in PyTorch", "[graph][versions]") {
    // add never reads its inputs (only their shapes), so changing one is harmless.
    Tensor x(Array{1.0, 2.0}, true), w(Array{3.0, 4.0}, true);
    Tensor y = sum(x + w);
    w.mutable_value() *= 10.0;
    y.backward();
    CHECK(x.grad_value() == Array{1.0, 1.0});
    CHECK(w.grad_value() == Array{1.0, 1.0});

    // mul reads x only for w's gradient: with w alone requiring grad, changing w is harmless.
    Tensor c(Array{2.0, 5.0});
    Tensor v(Array{1.0, 1.0}, true);
    Tensor z = sum(c * v);
    v.mutable_value() *= 3.0;
    z.backward();
    CHECK(v.grad_value() == Array{2.0, 5.0});
}

TEST_CASE("fused nodes check the inputs they read", "[graph][versions]") {
    manual_seed(5);
    SECTION("linear reads its weight for dx") {
        Tensor x = randn({2, 3}).requires_grad_();
        Tensor w = randn({4, 3}).requires_grad_(), b = randn({4}).requires_grad_();
        Tensor y = sum(nn::functional::linear(x, w, b));
        w.mutable_value() *= 2.0;
        CHECK_THROWS_WITH(y.backward(), Contains("backward of 'linear'") && Contains("input 1 of 'linear' (a leaf of shape (4, 3))"));
    }
    SECTION("layer_norm reads its input") {
        Tensor x = randn({2, 5}).requires_grad_();
        Tensor y = sum(nn::functional::layer_norm(x, {5}) * randn({2, 5}));
        x.mutable_value() += 1.0;
        CHECK_THROWS_WITH(y.backward(), Contains("backward of 'layer_norm'") && Contains("input 0 of 'layer_norm'"));
    }
    SECTION("gelu reads its input") {
        Tensor x = randn({3}).requires_grad_();
        Tensor y = sum(nn::functional::gelu(x));
        x.mutable_value() *= 2.0;
        CHECK_THROWS_WITH(y.backward(), Contains("backward of 'gelu'"));
    }
    SECTION("the bias of linear is never read: changing it is harmless") {
        Tensor x = randn({2, 3}).requires_grad_();
        Tensor w = randn({4, 3}), b = randn({4}).requires_grad_();
        Tensor y = sum(nn::functional::linear(x, w, b));
        b.mutable_value() *= 2.0;
        y.backward();
        CHECK(b.grad_value() == Array{2.0, 2.0, 2.0, 2.0});
    }
}

TEST_CASE("retain_graph backwards without changes in between keep working", "[graph][versions]") {
    Tensor x(Array{1.0, 2.0}, true);
    Tensor y = sum(tanh(x) * x);
    y.backward(BackwardOptions{true});
    const Array first = x.grad_value();
    x.zero_grad();  // gradients are not values: clearing them changes no version
    y.backward(BackwardOptions{true});
    CHECK(x.grad_value() == first);
    x.mutable_grad() *= 2.0;
    y.backward();
    CHECK(x.grad_value() == 3.0 * first);
}

}  // namespace xg_test_engine_versions
