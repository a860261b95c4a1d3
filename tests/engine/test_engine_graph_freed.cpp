// After backward() without retain_graph, the graph keeps no closure and no saved array while
// the loss is still alive (a hole found by mutation testing: dropping `node->backward = nullptr`
// in core/engine/tensor.cpp went unnoticed). The nodes themselves stay linked, so a second backward can
// name the freed op; only what the closures captured is released.
#include <memory>
#include <unordered_set>
#include <vector>

#include <catch2/catch.hpp>

#include "nn/nn.hpp"

namespace xg_test_engine_graph_freed {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using Catch::Contains;

namespace {

// Every node reachable from `root` through parents, root first.
std::vector<NodePtr> graph_of(const Tensor& root) {
    std::vector<NodePtr> nodes{root.node()}, stack{root.node()};
    std::unordered_set<Node*> seen{root.node().get()};
    while (!stack.empty()) {
        NodePtr n = stack.back();
        stack.pop_back();
        for (const NodePtr& p : n->parents) {
            if (seen.insert(p.get()).second) {
                nodes.push_back(p);
                stack.push_back(p);
            }
        }
    }
    return nodes;
}

// An op whose closure keeps `saved` alive, standing for the arrays real closures capture.
Tensor keeps(const Tensor& x, const std::shared_ptr<Array>& saved) {
    // d keeps(x)/dx = 1
    return record("keeps", x.value(), {x}, [saved](const GradContext& c) -> Grads { return {Array(c.grad)}; });
}

}  // namespace

TEST_CASE("backward without retain_graph frees every closure while the loss is alive", "[graph][leaks]") {
    manual_seed(21);
    nn::Sequential net{std::make_shared<nn::Linear>(4, 8), std::make_shared<nn::LayerNorm>(8),
                       std::make_shared<nn::GELU>(), std::make_shared<nn::Linear>(8, 3)};
    const Tensor x = randn({5, 4}, true);
    auto saved = std::make_shared<Array>(xt::zeros<double>({1000}));
    const Tensor loss = mean(tanh(keeps(net.forward(x), saved)) * 2.0);
    const std::vector<NodePtr> before = graph_of(loss);
    std::size_t ops = 0;
    for (const NodePtr& n : before) ops += n->is_leaf() ? 0 : 1;
    REQUIRE(ops >= 8);
    CHECK(saved.use_count() == 2);  // the test and the closure

    loss.backward();
    CHECK(saved.use_count() == 1);  // the closure let go of its saved array
    for (const NodePtr& n : graph_of(loss)) {
        INFO("node '" << n->op << "'");
        if (n->is_leaf()) continue;
        CHECK_FALSE(static_cast<bool>(n->backward));
        CHECK_FALSE(static_cast<bool>(n->kernel));
        CHECK(n->freed);
    }
    CHECK_THROWS_WITH(loss.backward(), Contains("trying to backward through the graph a second time"));
}

TEST_CASE("backward with retain_graph keeps every closure until the last backward", "[graph][leaks]") {
    const Tensor x = randn({3}, true);
    auto saved = std::make_shared<Array>(xt::zeros<double>({10}));
    const Tensor loss = sum(exp(keeps(x, saved)));
    loss.backward(BackwardOptions{true});
    CHECK(saved.use_count() == 2);
    for (const NodePtr& n : graph_of(loss)) {
        if (!n->is_leaf()) CHECK(static_cast<bool>(n->backward || n->kernel));  // `keeps` is a kernel
    }
    loss.backward();
    CHECK(saved.use_count() == 1);
}

}  // namespace xg_test_engine_graph_freed
