// Graph semantics of xg::Tensor::backward: accumulation (also in place, GradContext::accumulated),
// retain_graph, no-grad mode, detach, retain_grad, error messages, very deep graphs, node lifetime
// and anomaly mode.
#include <chrono>
#include <cmath>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/ops/ops.hpp"

namespace xg_test_engine_graph {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using xg::Tensor;
using Catch::Contains;

TEST_CASE("reusing a tensor in one expression sums both paths", "[graph]") {
    Tensor x(xg::Array{1.5, -2.0, 3.0}, true);
    xg::sum(x * x).backward();
    CHECK(x.grad_value() == xg::Array{3.0, -4.0, 6.0});

    // x appears three times through two branches: d/dx (x*x + x) = 2x + 1.
    Tensor y(xg::Array{0.5, 2.0}, true);
    Tensor branch = y * y;
    xg::sum(branch + y).backward();
    CHECK(y.grad_value() == xg::Array{2.0, 5.0});
}

TEST_CASE("parts added in place (GradContext::accumulated) sum with returned ones", "[graph]") {
    // Overlapping narrows add into x's gradient in place; x * 2 returns its part.
    Tensor x(xg::Array{1.0, 2.0, 3.0}, true);
    (xg::sum(xg::narrow(x, 0, 0, 2)) + xg::sum(xg::narrow(x, 0, 1, 2)) + xg::sum(x * 2.0)).backward();
    CHECK(x.grad_value() == xg::Array{3.0, 4.0, 3.0});
    xg::sum(xg::narrow(x, 0, 2, 1)).backward();  // and across backward calls, into .grad
    CHECK(x.grad_value() == xg::Array{3.0, 4.0, 4.0});

    // An op that adds 10 * g into input 0 in place and returns nothing for it; input 1 needs no
    // gradient, and asking for its slot is an error naming backward.
    const auto scaled = [](const Tensor& a, const Tensor& b, bool ask_for_b) {
        return xg::record("scaled", a.value() * 10.0, {a, b}, [ask_for_b](const xg::GradContext& c) -> xg::Grads {
            double* g = c.accumulated(0).data();
            for (std::size_t i = 0; i < c.grad.size(); ++i) g[i] += 10.0 * c.grad.data()[i];
            if (ask_for_b) c.accumulated(1);
            return {std::nullopt, std::nullopt};
        });
    };
    Tensor a(xg::Array{1.0, 1.0}, true);
    const Tensor constant(xg::Array{5.0, 5.0});
    xg::sum(scaled(a, constant, false) + a).backward();
    CHECK(a.grad_value() == xg::Array{11.0, 11.0});
    CHECK_THROWS_WITH(xg::sum(scaled(a, constant, true)).backward(), Contains("backward") && Contains("accumulated(1)"));
}

TEST_CASE("gradients accumulate across backward calls until zero_grad", "[graph]") {
    Tensor x(xg::Array{1.0, 2.0}, true);
    xg::sum(x * 3.0).backward();
    CHECK(x.grad_value() == xg::Array{3.0, 3.0});
    xg::sum(x * x).backward();  // a second, separate graph adds 2x
    CHECK(x.grad_value() == xg::Array{5.0, 7.0});

    x.zero_grad();
    CHECK_FALSE(x.has_grad());
    CHECK_FALSE(x.grad().defined());
    CHECK_THROWS_WITH(x.grad_value(), Contains("no gradient"));
    xg::sum(x).backward();
    CHECK(x.grad_value() == xg::Array{1.0, 1.0});
}

TEST_CASE("NoGradGuard records no graph", "[graph]") {
    Tensor x(xg::Array{1.0, 2.0}, true);
    {
        xg::NoGradGuard guard;
        CHECK_FALSE(xg::grad_mode_enabled());
        Tensor y = xg::exp(x * 2.0) + x;
        CHECK_FALSE(y.requires_grad());
        CHECK(y.is_leaf());
        CHECK(y.op() == "leaf");
        CHECK(y.node()->parents.empty());
        CHECK_FALSE(static_cast<bool>(y.node()->backward));
        CHECK_THROWS_WITH(xg::sum(y).backward(), Contains("does not require grad"));
        {
            xg::NoGradGuard nested;
        }
        CHECK_FALSE(xg::grad_mode_enabled());  // the inner guard restores "off", not "on"
    }
    CHECK(xg::grad_mode_enabled());
    CHECK((x * 2.0).requires_grad());
}

TEST_CASE("retain_graph allows a second backward, without it the second one fails clearly", "[graph]") {
    Tensor x(xg::Array{1.0, -1.0}, true);
    Tensor loss = xg::sum(xg::tanh(x) * x);
    loss.backward(xg::BackwardOptions{true});
    const xg::Array first = x.grad_value();
    loss.backward();  // retained graph: runs again and accumulates
    CHECK(x.grad_value() == xg::Array(2.0 * first));

    // The previous call did not retain: the graph is now freed.
    CHECK_THROWS_AS(loss.backward(), xg::Error);
    CHECK_THROWS_WITH(loss.backward(), Contains("second time") && Contains("retain_graph=true") && Contains("'sum'"));
}

TEST_CASE("backward on a non-scalar needs an explicit gradient", "[graph]") {
    Tensor x(xg::Array{{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}, true);
    Tensor y = x * 2.0;
    CHECK_THROWS_AS(y.backward(), xg::Error);
    CHECK_THROWS_WITH(y.backward(), Contains("backward") && Contains("scalar outputs") && Contains("(2, 3)"));

    // A gradient of the wrong shape names both shapes.
    CHECK_THROWS_WITH(y.backward(Tensor(xg::Array{1.0, 2.0, 3.0})), Contains("(3,)") && Contains("(2, 3)"));

    y.backward(Tensor(xg::Array{{1.0, 0.0, -1.0}, {0.5, 2.0, 3.0}}));
    CHECK(x.grad_value() == xg::Array{{2.0, 0.0, -2.0}, {1.0, 4.0, 6.0}});
}

TEST_CASE("detach makes an independent leaf that blocks gradients", "[graph]") {
    Tensor x(xg::Array{1.0, 2.0}, true);
    Tensor h = x * 3.0;
    Tensor d = h.detach();
    CHECK(d.is_leaf());
    CHECK_FALSE(d.requires_grad());
    CHECK(d.value() == h.value());
    d.mutable_value()(0) = 100.0;  // a copy: the graph's value is untouched
    CHECK(h(0) == 3.0);

    // d is a constant: only the direct path x*d contributes, with d's value (100, 6).
    xg::sum(x * d + h).backward();
    CHECK(x.grad_value() == xg::Array{103.0, 9.0});
}

TEST_CASE("retain_grad keeps the gradient of a non-leaf", "[graph]") {
    Tensor x(xg::Array{1.0, -2.0}, true);
    Tensor h = x * 2.0;
    Tensor kept = h + 1.0;
    kept.retain_grad();
    xg::sum(kept * kept).backward();
    CHECK_FALSE(h.has_grad());  // non-leaves drop their gradient by default
    REQUIRE(kept.has_grad());
    CHECK(kept.grad_value() == xg::Array{6.0, -6.0});  // 2 * (2x + 1)
    CHECK(x.grad_value() == xg::Array{12.0, -12.0});
}

TEST_CASE("requires_grad_ only applies to leaves", "[graph]") {
    Tensor x(xg::Array{1.0}, true);
    Tensor y = x * 2.0;
    CHECK_THROWS_WITH(y.requires_grad_(false), Contains("leaf") && Contains("'mul'"));
    Tensor c(xg::Array{1.0});
    c.requires_grad_();
    CHECK(c.requires_grad());
}

TEST_CASE("a million-node chain backpropagates and tears down without deep recursion", "[graph]") {
    const std::size_t start_nodes = xg::live_node_count();
    const auto t0 = std::chrono::steady_clock::now();
    {
        Tensor x = xg::scalar(1.0, true);
        const Tensor factor = xg::scalar(1.0000001);  // shared, so each step adds just one node
        Tensor y = x;
        for (int i = 0; i < 1000000; ++i) y = y * factor;
        CHECK(y.item() == Approx(std::pow(1.0000001, 1e6)).epsilon(1e-9));
        y.backward();
        CHECK(x.grad_value()() == Approx(std::pow(1.0000001, 1e6)).epsilon(1e-9));
    }  // dropping y frees a million nodes: Node::~Node unlinks them iteratively
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(xg::live_node_count() == start_nodes);
    // Printed, not asserted: wall time depends on the machine and its load (ctest's timeout
    // catches a quadratic walk). The test's claim is that nothing recurses a million deep.
    fmt::print("chain of 1e6 muls: build + backward + teardown took {:.2f} s\n", seconds);
}

TEST_CASE("live_node_count returns to its start after a graph is dropped", "[graph]") {
    const std::size_t start = xg::live_node_count();
    {
        Tensor a(xg::Array{{1.0, 2.0}, {3.0, 4.0}}, true);
        Tensor b(xg::Array{0.5, -0.5}, true);
        Tensor loss = xg::sum(xg::softmax(xg::matmul(a, a) + b) * a);
        CHECK(xg::live_node_count() > start);
        loss.backward(xg::BackwardOptions{true});
        loss.backward();
        CHECK(a.has_grad());
    }
    CHECK(xg::live_node_count() == start);
    {
        xg::NoGradGuard guard;
        Tensor x(xg::Array{1.0, 2.0}, true);
        Tensor y = xg::exp(x) * 2.0;
    }
    CHECK(xg::live_node_count() == start);
}

TEST_CASE("anomaly mode names the op that produced a NaN or inf", "[graph]") {
    CHECK_FALSE(xg::anomaly_mode_enabled());
    {
        xg::AnomalyModeGuard guard;
        CHECK(xg::anomaly_mode_enabled());
        Tensor neg(xg::Array{1.0, -1.0}, true);
        CHECK_THROWS_AS(xg::log(neg), xg::Error);
        CHECK_THROWS_WITH(xg::log(neg), Contains("forward of 'log'") && Contains("nan") && Contains("flat index 1"));
        Tensor zero(xg::Array{2.0, 0.0}, true);
        CHECK_THROWS_WITH(xg::log(zero), Contains("'log'") && Contains("-inf"));
        CHECK_THROWS_WITH(xg::sqrt(xg::scalar(-1.0, true)), Contains("forward of 'sqrt'") && Contains("nan"));

        // sqrt(0) = 0 is fine forward; its gradient 1/(2*0) is not, and backward says so.
        Tensor root = xg::sqrt(zero);
        CHECK_THROWS_WITH(xg::sum(root).backward(), Contains("backward of 'sqrt'") && Contains("inf"));
    }
    CHECK_FALSE(xg::anomaly_mode_enabled());
    // Outside anomaly mode the NaN propagates silently, as in PyTorch.
    CHECK(std::isnan(xg::log(Tensor(xg::Array{-1.0}))(0)));
}

TEST_CASE("the worked example of docs/autograd.md", "[graph]") {
    // L = sum(tanh(a*b + c)); the numbers below are quoted in the document.
    Tensor a(xg::Array{0.5, -1.0}, true), b(xg::Array{2.0, 0.5}, true);
    Tensor c = xg::scalar(0.25, true);
    Tensor m = a * b, s = m + c, t = xg::tanh(s), L = xg::sum(t);
    for (Tensor* n : {&m, &s, &t}) n->retain_grad();
    CHECK(m.op() == "mul");
    CHECK(s.op() == "add");
    CHECK(t.op() == "tanh");
    CHECK(L.op() == "sum");
    CHECK(s.value() == xg::Array{1.25, -0.25});
    CHECK(L.item() == Approx(0.60336497755380369).epsilon(1e-15));
    L.backward();
    CHECK(t.grad_value() == xg::Array{1.0, 1.0});
    CHECK(s.grad_value()(0) == Approx(0.28041486618043265).epsilon(1e-15));
    CHECK(s.grad_value()(1) == Approx(0.94001484880637798).epsilon(1e-15));
    CHECK(m.grad_value() == s.grad_value());
    CHECK(c.grad_value()() == Approx(1.2204297149868106).epsilon(1e-15));
    CHECK(a.grad_value()(0) == Approx(0.56082973236086531).epsilon(1e-15));
    CHECK(a.grad_value()(1) == Approx(0.47000742440318899).epsilon(1e-15));
    CHECK(b.grad_value()(0) == Approx(0.14020743309021633).epsilon(1e-15));
    CHECK(b.grad_value()(1) == Approx(-0.94001484880637798).epsilon(1e-15));
}

}  // namespace xg_test_engine_graph
