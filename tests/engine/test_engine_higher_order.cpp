// xg::grad (torch.autograd.grad's semantics) and create_graph: gradients of gradients.
#include <catch2/catch.hpp>

#include <cmath>

#include "core/ops/ops.hpp"
#include "core/engine/tensor.hpp"

namespace xg_test_engine_higher_order {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using xg::Tensor;

TEST_CASE("xg::grad returns gradients and leaves every .grad untouched", "[autograd][higher-order]") {
    Tensor x({1.0, 2.0, 3.0});
    x.requires_grad_();
    Tensor w({0.5, -1.0, 2.0});
    w.requires_grad_();
    const Tensor loss = xg::sum(x * x * w);
    const std::vector<Tensor> g = xg::grad({loss}, {x, w});
    REQUIRE(g.size() == 2);
    // d/dx sum(x^2 w) = 2 x w, d/dw = x^2
    CHECK(g[0](0) == 1.0);
    CHECK(g[0](1) == -4.0);
    CHECK(g[0](2) == 12.0);
    CHECK(g[1](2) == 9.0);
    CHECK_FALSE(x.has_grad());
    CHECK_FALSE(w.has_grad());
    CHECK_FALSE(g[0].requires_grad());  // without create_graph: plain values
    // the graph was freed (retain_graph false), as in PyTorch
    CHECK_THROWS_WITH(xg::grad({loss}, {x}), Catch::Contains("backward through the graph a second time"));
}

TEST_CASE("xg::grad with several outputs and grad_outputs, and a non-leaf input", "[autograd][higher-order]") {
    Tensor x({1.0, -2.0});
    x.requires_grad_();
    const Tensor h = x * 3.0;  // a non-leaf input: the walk stops there
    const Tensor y1 = h * h, y2 = xg::sum(h);
    const std::vector<Tensor> g = xg::grad({y1, y2}, {h}, {Tensor({1.0, 10.0}), Tensor()});
    // d/dh (sum(v * h^2) + sum(h)) = 2 v h + 1
    CHECK(g[0](0) == 2.0 * 1.0 * 3.0 + 1.0);
    CHECK(g[0](1) == 2.0 * 10.0 * -6.0 + 1.0);
    CHECK_FALSE(x.has_grad());
}

TEST_CASE("xg::grad names an unused input unless allow_unused", "[autograd][higher-order][errors]") {
    Tensor x({1.0}), unused({2.0, 3.0});
    x.requires_grad_();
    unused.requires_grad_();
    const Tensor y = xg::sum(x * 2.0);
    CHECK_THROWS_WITH(xg::grad({y}, {x, unused}, {}, {true}), Catch::Contains("grad: input 1 (shape (2,)) was not used"));
    const std::vector<Tensor> g = xg::grad({y}, {x, unused}, {}, xg::GradOptions{false, false, true});
    CHECK(g[0](0) == 2.0);
    CHECK_FALSE(g[1].defined());
    Tensor constant({1.0});
    CHECK_THROWS_WITH(xg::grad({y}, {constant}), Catch::Contains("input 0 (shape (1,)) does not require grad"));
    CHECK_THROWS_WITH(xg::grad({x * 2.0}, {x}, {Tensor({1.0, 2.0})}), Catch::Contains("grad_outputs[0] has shape (2,)"));
}

TEST_CASE("create_graph: gradients of gradients to third order", "[autograd][higher-order]") {
    // y = x^3 + sin(x) * x: y' = 3x^2 + cos x * x + sin x, y'' = 6x - sin x * x + 2 cos x,
    // y''' = 6 - cos x * x - 3 sin x
    Tensor x = xg::scalar(0.7, true);
    const Tensor y = xg::pow(x, 3.0) + xg::sin(x) * x;
    const xg::GradOptions create{false, true, false};
    const Tensor d1 = xg::grad({y}, {x}, {}, create)[0];
    const Tensor d2 = xg::grad({d1}, {x}, {}, create)[0];
    const Tensor d3 = xg::grad({d2}, {x})[0];
    const double v = 0.7;
    CHECK(d1.item() == Approx(3 * v * v + std::cos(v) * v + std::sin(v)).epsilon(1e-14));
    CHECK(d2.item() == Approx(6 * v - std::sin(v) * v + 2 * std::cos(v)).epsilon(1e-14));
    CHECK(d3.item() == Approx(6 - std::cos(v) * v - 3 * std::sin(v)).epsilon(1e-14));
    CHECK_FALSE(x.has_grad());
}

TEST_CASE("backward(create_graph) leaves a differentiable .grad", "[autograd][higher-order]") {
    Tensor x({0.5, -1.5});
    x.requires_grad_();
    xg::sum(xg::exp(x) * x).backward(xg::BackwardOptions{false, true});
    // .grad = (x + 1) e^x, a tensor of the graph; d/dx sum(.grad) = (x + 2) e^x
    const Tensor g = x.grad();
    REQUIRE(g.requires_grad());
    CHECK(g(0) == Approx(1.5 * std::exp(0.5)).epsilon(1e-15));
    const Tensor gg = xg::grad({xg::sum(g)}, {x})[0];
    CHECK(gg(0) == Approx(2.5 * std::exp(0.5)).epsilon(1e-15));
    CHECK(gg(1) == Approx(0.5 * std::exp(-1.5)).epsilon(1e-15));
    x.zero_grad();  // breaks the reference cycle x -> .grad's graph -> x
    CHECK_FALSE(x.has_grad());
}

TEST_CASE("a gradient penalty ||dL/dx||^2 trains through create_graph", "[autograd][higher-order]") {
    // L = sum(w x^2); dL/dx = 2 w x; penalty P = sum((2 w x)^2) = 4 sum(w^2 x^2); dP/dw = 8 w x^2
    Tensor x({1.0, 2.0}), w({0.5, -0.25});
    x.requires_grad_();
    w.requires_grad_();
    const Tensor L = xg::sum(w * x * x);
    const Tensor gx = xg::grad({L}, {x}, {}, {false, true})[0];
    xg::sum(gx * gx).backward();
    CHECK(w.grad()(0) == 8 * 0.5 * 1.0);
    CHECK(w.grad()(1) == 8 * -0.25 * 4.0);
}

TEST_CASE("create_graph keeps the version-counter check", "[autograd][higher-order][errors]") {
    Tensor x({1.0, 2.0});
    x.requires_grad_();
    const Tensor y = xg::sum(x * x);
    x.mutable_value()(0) = 5.0;  // changed after mul's forward read it
    CHECK_THROWS_WITH(xg::grad({y}, {x}, {}, {false, true}), Catch::Contains("modified by an inplace operation"));
    // and the graph built by create_graph is checked too when it is differentiated
    Tensor z({1.0, 2.0});
    z.requires_grad_();
    const Tensor dz = xg::grad({xg::sum(xg::sin(z))}, {z}, {}, {false, true})[0];  // cos(z) reads z again
    z.mutable_value()(1) = 0.0;
    CHECK_THROWS_WITH(xg::grad({xg::sum(dz)}, {z}), Catch::Contains("modified by an inplace operation"));
}

// x^2 recorded with a first-order kernel only, as a fused op without a composed twin would be.
Tensor square_by_kernel(const Tensor& x) {
    return xg::record("square_by_kernel", xg::Array(x.value() * x.value()), {x}, [](const xg::GradContext& c) -> xg::Grads {
        return {xg::Array(2.0 * c.input(0) * c.grad)};
    });
}

TEST_CASE("an op without a double backward refuses a second differentiation", "[autograd][higher-order][errors]") {
    Tensor x({1.0, 2.0, 3.0});
    x.requires_grad_();
    // a kernel without a differentiable backward: its first-order gradient works under create_graph...
    const Tensor g = xg::grad({xg::sum(square_by_kernel(x))}, {x}, {}, {false, true})[0];
    CHECK(g(2) == 6.0);
    // ...but differentiating that gradient again names the op instead of returning zeros
    CHECK_THROWS_WITH(xg::grad({xg::sum(g)}, {x}), Catch::Contains("'square_by_kernel' has no double backward"));
}

TEST_CASE("10 000 double-backward iterations keep live_node_count flat", "[autograd][higher-order][leak]") {
    Tensor w({0.3, -0.2, 0.1});
    w.requires_grad_();
    const Tensor x({1.0, 2.0, -1.0});
    const std::size_t before = xg::live_node_count();
    std::size_t after_first = 0;
    for (int i = 0; i < 10000; ++i) {
        if (i == 1) after_first = xg::live_node_count();  // everything of iteration 0 is gone
        const Tensor loss = xg::sum(xg::tanh(w * x) * w);
        const Tensor gw = xg::grad({loss}, {w}, {}, {false, true})[0];
        const Tensor hv = xg::grad({xg::sum(gw * gw)}, {w})[0];  // gradient penalty's gradient
        xg::NoGradGuard no_grad;
        w.mutable_value() -= 1e-4 * hv.value();
    }
    CHECK(after_first == before);
    CHECK(xg::live_node_count() == before);
}

}  // namespace xg_test_engine_higher_order
