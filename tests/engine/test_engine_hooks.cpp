// Gradient hooks (Tensor::register_hook) and module forward hooks, with PyTorch's semantics.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/ops/ops.hpp"
#include "core/engine/random.hpp"
#include "core/engine/tensor.hpp"
#include "nn/modules/activation.hpp"
#include "nn/modules/layers.hpp"
#include "nn/modules/module.hpp"

namespace xg_test_engine_hooks {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using xg::Tensor;

namespace {
double norm_of(const Tensor& t) {
    double s = 0.0;
    for (std::size_t i = 0; i < t.numel(); ++i) s += t.data()[i] * t.data()[i];
    return std::sqrt(s);
}
}  // namespace

TEST_CASE("a replacing hook on an intermediate scales the gradient its inputs receive", "[hooks]") {
    Tensor x({1.0, -2.0, 3.0});
    x.requires_grad_();
    const Tensor h = x * 3.0;
    std::vector<Tensor> seen;
    h.register_hook([&](const Tensor& g) {
        seen.push_back(g);
        return g * 2.0;
    });
    xg::sum(h * h).backward();
    // dL/dh = 2h, summed over both uses of h before the hook runs (once); dL/dx = 3 * 2 * (2h)
    REQUIRE(seen.size() == 1);
    CHECK(seen[0](0) == 6.0);
    CHECK(seen[0](1) == -12.0);
    CHECK(seen[0](2) == 18.0);
    CHECK(x.grad()(0) == 36.0);
    CHECK(x.grad()(1) == -72.0);
    CHECK(x.grad()(2) == 108.0);
}

TEST_CASE("a hook on a leaf replaces what is stored in .grad and sees only the incoming gradient", "[hooks]") {
    Tensor w({2.0, 4.0});
    w.requires_grad_();
    std::vector<double> seen;
    w.register_hook([&](const Tensor& g) {
        seen.push_back(g(1));
        return g * 0.5;
    });
    xg::sum(w * w).backward();  // dL/dw = 2w
    CHECK(w.grad()(0) == 2.0);
    CHECK(w.grad()(1) == 4.0);
    xg::sum(w * w).backward();  // accumulates; the hook sees this pass's gradient, not the sum
    CHECK(seen == std::vector<double>{8.0, 8.0});
    CHECK(w.grad()(0) == 4.0);
    CHECK(w.grad()(1) == 8.0);
}

TEST_CASE("hooks run in registration order, each seeing the previous one's result", "[hooks]") {
    Tensor x({1.0});
    x.requires_grad_();
    const Tensor y = x * 5.0;
    std::vector<std::string> log;
    y.register_hook([&](const Tensor& g) {
        log.push_back("first saw " + std::to_string(static_cast<int>(g(0))));
        return g + 1.0;
    });
    y.register_hook([&](const Tensor& g) { log.push_back("observer saw " + std::to_string(static_cast<int>(g(0)))); });
    y.register_hook([&](const Tensor& g) {
        log.push_back("third saw " + std::to_string(static_cast<int>(g(0))));
        return g * 10.0;
    });
    y.backward();
    CHECK(log == std::vector<std::string>{"first saw 1", "observer saw 2", "third saw 2"});
    CHECK(x.grad()(0) == 100.0);  // (1 + 1) * 10 * 5
}

TEST_CASE("remove() unregisters a hook, removing twice or after the tensor is gone is harmless", "[hooks]") {
    Tensor x({3.0});
    x.requires_grad_();
    int calls = 0;
    xg::RemovableHandle doubling = x.register_hook([&](const Tensor& g) {
        ++calls;
        return g * 2.0;
    });
    (x * 1.0).backward();
    CHECK(x.grad()(0) == 2.0);
    doubling.remove();
    doubling.remove();
    x.zero_grad();
    (x * 1.0).backward();
    CHECK(x.grad()(0) == 1.0);
    CHECK(calls == 1);

    xg::RemovableHandle orphan;
    {
        Tensor t({1.0});
        t.requires_grad_();
        orphan = t.register_hook([](const Tensor&) {});
    }
    orphan.remove();
    xg::RemovableHandle empty;
    empty.remove();
}

TEST_CASE("a hook that removes itself while running runs once", "[hooks]") {
    Tensor x({1.0});
    x.requires_grad_();
    int calls = 0;
    xg::RemovableHandle handle;
    handle = x.register_hook([&](const Tensor&) {
        ++calls;
        handle.remove();
    });
    (x * 2.0).backward();
    (x * 2.0).backward();
    CHECK(calls == 1);
    CHECK(x.grad()(0) == 4.0);
}

TEST_CASE("a post-accumulate hook sees the leaf with its .grad updated, while backward goes on", "[hooks]") {
    Tensor w({1.0, 2.0}), b({0.5, 0.5});
    w.requires_grad_();
    b.requires_grad_();
    std::vector<std::string> events;
    std::vector<double> seen;
    auto handle = w.register_post_accumulate_grad_hook([&](const Tensor& leaf) {
        events.push_back("w");
        seen.push_back(leaf.grad()(1));
    });
    b.register_post_accumulate_grad_hook([&](const Tensor&) { events.push_back("b"); });
    // b's gradient is complete before the walk reaches w (b is used after w): its hook runs first
    const Tensor h = w * 3.0;
    h.register_hook([&](const Tensor&) { events.push_back("h"); });
    const Tensor loss = xg::sum(h + b);
    loss.backward(true);
    CHECK(events == std::vector<std::string>{"b", "h", "w"});
    loss.backward();  // a second backward adds to .grad: the hook sees the sum
    REQUIRE(seen.size() == 2);
    CHECK(seen[0] == 3.0);
    CHECK(seen[1] == 6.0);
    handle.remove();
    xg::sum(w * 1.0).backward();
    CHECK(seen.size() == 2);
    // xg::grad stores no .grad and calls no post-accumulate hook
    b.register_post_accumulate_grad_hook([&](const Tensor&) { events.push_back("b again"); });
    const std::size_t before = events.size();
    xg::grad({xg::sum(b * 2.0)}, {b});
    CHECK(events.size() == before);
    CHECK_THROWS_WITH(h.register_post_accumulate_grad_hook([](const Tensor&) {}),
                      Catch::Contains("register_post_accumulate_grad_hook") && Catch::Contains("leaf"));
    CHECK_THROWS_WITH(Tensor({1.0}).register_post_accumulate_grad_hook([](const Tensor&) {}),
                      Catch::Contains("register_post_accumulate_grad_hook"));
}

TEST_CASE("register_hook errors name the op, the tensor and the shapes", "[hooks][errors]") {
    const Tensor constant({1.0, 2.0});
    CHECK_THROWS_WITH(constant.register_hook([](const Tensor&) {}),
                      Catch::Contains("register_hook: cannot register a hook on a tensor that does not require grad "
                                      "(a leaf of shape (2,))"));
    Tensor x({1.0, 2.0, 3.0});
    x.requires_grad_();
    const Tensor h = xg::exp(x);
    h.register_hook([](const Tensor&) { return Tensor({1.0, 2.0}); });
    CHECK_THROWS_WITH(xg::sum(h).backward(), Catch::Contains("register_hook: a hook on the output of 'exp', shape (3,) "
                                                             "returned a gradient of shape (2,); it must keep the shape (3,)"));
}

TEST_CASE("hooks apply to xg::grad: the returned gradient is the hooked one", "[hooks][higher-order]") {
    Tensor x({1.0, 2.0});
    x.requires_grad_();
    const Tensor h = x * x;
    auto on_h = h.register_hook([](const Tensor& g) { return g * 3.0; });
    auto on_x = x.register_hook([](const Tensor& g) { return g + 1.0; });
    const std::vector<Tensor> g = xg::grad({xg::sum(h)}, {x});
    // dL/dh = 1 -> 3; dL/dx = 3 * 2x -> + 1
    CHECK(g[0](0) == 7.0);
    CHECK(g[0](1) == 13.0);
    CHECK_FALSE(x.has_grad());
    on_h.remove();
    on_x.remove();
    CHECK(xg::grad({xg::sum(x * x)}, {x})[0](1) == 4.0);
}

TEST_CASE("under create_graph a hook sees a differentiable gradient and its ops are recorded", "[hooks][higher-order]") {
    const double x0 = 0.7;
    Tensor x = xg::scalar(x0, true);
    const Tensor h = x * x;
    bool differentiable = false;
    auto handle = h.register_hook([&](const Tensor& g) {
        differentiable = g.requires_grad();
        return g * h;  // dL/dh = 2h becomes 2h^2 = 2x^4
    });
    const Tensor gx = xg::grad({h * h}, {x}, {}, {false, true})[0];
    CHECK(differentiable);
    // dL/dx = 2x^4 * 2x = 4x^5; its derivative 20x^4 holds only if the hook's factor h was
    // recorded (4x^4 if it were a constant). The hook would fire again in the second pass, which also
    // reaches h (as in PyTorch), so it is removed first.
    CHECK(gx.item() == Approx(4.0 * std::pow(x0, 5)).epsilon(1e-14));
    handle.remove();
    const Tensor gxx = xg::grad({gx}, {x})[0];
    CHECK(gxx.item() == Approx(20.0 * std::pow(x0, 4)).epsilon(1e-14));

    Tensor w = xg::scalar(x0, true);
    w.register_hook([](const Tensor& g) { return g * 2.0; });
    (w * w * w).backward(xg::BackwardOptions{false, true});  // d/dw = 3w^2, doubled by the hook
    CHECK(w.grad().requires_grad());
    CHECK(w.grad().item() == Approx(6.0 * x0 * x0).epsilon(1e-14));
    w.zero_grad();  // breaks the reference cycle w -> .grad's graph -> w (LeakSanitizer checks)
}

TEST_CASE("forward hooks record per-layer activation norms of an MLP in a Sequential", "[hooks][module]") {
    xg::manual_seed(7);
    auto mlp = std::make_shared<xg::nn::Sequential>(std::initializer_list<std::shared_ptr<xg::nn::Module>>{
        std::make_shared<xg::nn::Linear>(3, 4), std::make_shared<xg::nn::Tanh>(), std::make_shared<xg::nn::Linear>(4, 2)});
    std::vector<std::string> layers;
    std::vector<double> norms;
    std::vector<xg::RemovableHandle> handles;
    for (const auto& [name, child] : mlp->named_children()) {
        handles.push_back(child->register_forward_hook([&, name = name](xg::nn::Module& m, const Tensor&, const Tensor& out) {
            layers.push_back(name + ":" + m.name());
            norms.push_back(norm_of(out));
        }));
    }
    const Tensor x = xg::randn({5, 3});
    const Tensor y = (*mlp)(x);
    CHECK(layers == std::vector<std::string>{"0:Linear", "1:Tanh", "2:Linear"});
    // the same layers called without hooks give the activations whose norms were recorded
    const Tensor a0 = (*mlp)[0]->forward(x), a1 = (*mlp)[1]->forward(a0), a2 = (*mlp)[2]->forward(a1);
    REQUIRE(norms.size() == 3);
    CHECK(norms[0] == norm_of(a0));
    CHECK(norms[1] == norm_of(a1));
    CHECK(norms[2] == norm_of(a2));
    CHECK(norm_of(y) == norm_of(a2));

    for (auto& h : handles) h.remove();
    (*mlp)(x);
    CHECK(norms.size() == 3);
}

namespace {
// A user model calling its children through operator(), as Sequential does.
struct TwoLayer : xg::nn::Module {
    std::shared_ptr<xg::nn::Linear> fc1 = register_module("fc1", std::make_shared<xg::nn::Linear>(2, 3));
    std::shared_ptr<xg::nn::Linear> fc2 = register_module("fc2", std::make_shared<xg::nn::Linear>(3, 1));
    Tensor forward(const Tensor& x) override { return (*fc2)(xg::relu((*fc1)(x))); }
};
}  // namespace

TEST_CASE("forward-pre hooks see the input before forward, hooks fire in a user subclass", "[hooks][module]") {
    xg::manual_seed(3);
    auto net = std::make_shared<TwoLayer>();
    std::vector<std::string> log;
    auto pre = net->register_forward_pre_hook([&](xg::nn::Module& m, const Tensor& in) {
        log.push_back("pre " + m.name() + " " + xg::shape_str(in.shape()));
    });
    net->register_forward_hook([&](xg::nn::Module&, const Tensor&, const Tensor& out) {
        log.push_back("post TwoLayer " + xg::shape_str(out.shape()));
    });
    auto inner = net->fc2->register_forward_pre_hook([&](xg::nn::Module&, const Tensor& in) {
        log.push_back("pre fc2 " + xg::shape_str(in.shape()));
    });
    const Tensor x = xg::randn({4, 2});
    (*net)(x);
    CHECK(log == std::vector<std::string>{"pre TwoLayer (4, 2)", "pre fc2 (4, 3)", "post TwoLayer (4, 1)"});

    pre.remove();
    inner.remove();
    log.clear();
    net->forward(x);  // forward() itself bypasses this module's hooks
    CHECK(log.empty());
    (*net)(x);
    CHECK(log == std::vector<std::string>{"post TwoLayer (4, 1)"});
    CHECK_THROWS_WITH(net->register_forward_hook(nullptr), Catch::Contains("TwoLayer: register_forward_hook: the hook is empty"));
}

}  // namespace xg_test_engine_hooks
