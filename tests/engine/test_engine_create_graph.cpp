// retain_grad under create_graph keeps a differentiable gradient, as a leaf's .grad does (issue 27).
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/engine/random.hpp"
#include "core/engine/threads.hpp"
#include "core/ops/ops.hpp"
#include "nn/nn.hpp"

namespace xg_test_engine_create_graph {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using Catch::Matchers::Contains;

// ---- item 2: under create_graph, retain_grad stored a constant copy of the gradient -----------

TEST_CASE("retain_grad under create_graph keeps a differentiable gradient, as a leaf's", "[issue27][autograd]") {
    // h = x^2, L = sum(h^2): dL/dh = 2h = 2x^2, so d/dx sum(h.grad * x) = d/dx sum(2x^3) = 6x^2,
    // [6, 24] at x = [1, 2] (PyTorch's answer; the constant copy gave h.grad itself, [2, 8]).
    Tensor x({1.0, 2.0});
    x.requires_grad_();
    Tensor h = x * x;
    h.retain_grad();
    sum(h * h).backward(BackwardOptions{false, true});
    REQUIRE(h.has_grad());
    CHECK(h.grad().requires_grad());
    CHECK(h.grad()(0) == 2.0);
    CHECK(h.grad()(1) == 8.0);
    const Tensor d = grad({sum(h.grad() * x)}, {x}, {}, GradOptions{true})[0];  // h's graph is used again below
    CHECK(d(0) == 6.0);
    CHECK(d(1) == 24.0);

    // A second backward adds to it and stays differentiable: h.grad = 4x^2, so 12x^2.
    sum(h * h).backward(BackwardOptions{false, true});
    CHECK(h.grad()(1) == 16.0);
    const Tensor d2 = grad({sum(h.grad() * x)}, {x})[0];
    CHECK(d2(0) == 12.0);
    CHECK(d2(1) == 48.0);

    // Without create_graph the retained gradient is a plain value, as before.
    Tensor y({1.0, 2.0});
    y.requires_grad_();
    Tensor k = y * y;
    k.retain_grad();
    sum(k * k).backward();
    CHECK_FALSE(k.grad().requires_grad());
    CHECK(k.grad()(1) == 8.0);
    // Under create_graph a stored gradient's graph refers back to its tensor: a reference cycle
    // through h (and through the leaf x) until zero_grad(), as in PyTorch (docs/autograd.md).
    h.zero_grad();
    x.zero_grad();
    CHECK_FALSE(h.has_grad());
}

}  // namespace xg_test_engine_create_graph
