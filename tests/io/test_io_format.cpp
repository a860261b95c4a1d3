// Printing (fmt::formatter<xg::Tensor>) and graph pictures (xg::to_dot).
#include <catch2/catch.hpp>
#include <cmath>

#include "core/tools/graphviz.hpp"
#include "core/io/format.hpp"
#include "core/ops/ops.hpp"

namespace xg_test_io_format {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using Catch::Matchers::Contains;

TEST_CASE("a matrix prints like PyTorch: nested brackets, aligned columns, shape", "[format]") {
    xg::Tensor t({{1.0, -2.5}, {3.0, 40.0}});
    CHECK(fmt::format("{}", t) ==
          "tensor([[ 1.0000, -2.5000],\n"
          "        [ 3.0000, 40.0000]], shape=(2, 2))");
}

TEST_CASE("requires_grad and the op that made a tensor are shown", "[format]") {
    xg::Tensor x({1.0, 2.0});
    x.requires_grad_();
    CHECK(fmt::format("{}", x) == "tensor([1.0000, 2.0000], shape=(2,), requires_grad=true)");
    CHECK(fmt::format("{}", x * 2.0) == "tensor([2.0000, 4.0000], shape=(2,), requires_grad=true, grad_fn=mul)");
}

TEST_CASE("0-D, 3-D, non-finite and undefined tensors print", "[format]") {
    CHECK(fmt::format("{}", xg::scalar(3.5)) == "tensor(3.5000, shape=())");
    CHECK(fmt::format("{}", xg::Tensor()) == "tensor(undefined)");
    CHECK(fmt::format("{}", xg::Tensor({NAN, INFINITY, -1.0})) == "tensor([    nan,     inf, -1.0000], shape=(3,))");
    const std::string cube = fmt::format("{}", xg::reshape(xg::arange(8), {2, 2, 2}));
    CHECK(cube ==
          "tensor([[[0.0000, 1.0000],\n"
          "         [2.0000, 3.0000]],\n"
          "\n"
          "        [[4.0000, 5.0000],\n"
          "         [6.0000, 7.0000]]], shape=(2, 2, 2))");
}

TEST_CASE("large tensors are summarised and wide ranges switch to scientific notation", "[format]") {
    CHECK(fmt::format("{}", xg::arange(2000)) ==
          "tensor([   0.0000,    1.0000,    2.0000, ..., 1997.0000, 1998.0000, 1999.0000], shape=(2000,))");
    CHECK(fmt::format("{}", xg::Tensor({1e-6, 1.0, 1e6})) == "tensor([1.0000e-06, 1.0000e+00, 1.0000e+06], shape=(3,))");
}

TEST_CASE("to_dot names every op with its shape and the tensors it saved", "[format]") {
    xg::Tensor x({{1.0, 2.0, 3.0}});
    x.requires_grad_();
    const xg::Tensor y = xg::sum(xg::var(x, {-1}, false, true));
    const std::string dot = xg::to_dot(y, "var");
    CHECK_THAT(dot, Contains("digraph xgrad"));
    CHECK_THAT(dot, Contains("sum\\n()"));
    CHECK_THAT(dot, Contains("var\\n(1, 1)"));
    CHECK_THAT(dot, Contains("leaf\\n(1, 3)\\nrequires_grad"));
    CHECK_THAT(dot, Contains("n2 -> n1;"));

    // Named nodes: a leaf shows its name instead of "leaf", an op "name = op".
    const std::string named = xg::to_dot(y, "var", {{x.node().get(), "x"}, {y.node().get(), "loss"}});
    CHECK_THAT(named, Contains("x\\n(1, 3)\\nrequires_grad"));
    CHECK_THAT(named, Contains("loss = sum\\n()"));
    CHECK_THAT(named, !Contains("leaf\\n"));
}

}  // namespace xg_test_io_format
