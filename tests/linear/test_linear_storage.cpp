// Native float32 storage of the matrix products (issue 28 part 2): linear and matmul on float32
// tensors run sgemm on their float32 values, forward and backward, and never widen an input, the
// output or a gradient into a float64 mirror (Node::value_mirror / grad_mirror stay None); nor do
// the other ops of an MLP step that have float32 kernels (add, sub, mul with a broadcast row or a
// scalar, GELU).
#include <vector>

#include <catch2/catch.hpp>

#include "core/engine/random.hpp"
#include "core/ops/ops.hpp"
#include "nn/nn.hpp"

namespace xg_test_linear_storage {  // one namespace per test file: the files are compiled in batches

namespace F = xg::nn::functional;
using xg::FloatArray;
using xg::Shape;
using xg::Tensor;
using Mirror = xg::Node::Mirror;

namespace {

Tensor float32_leaf(const Shape& shape, std::uint64_t seed, bool requires_grad = true) {
    xg::Generator gen(seed);
    return Tensor::from_float32(xg::to_float32_array(xg::randn(shape, gen).value()), requires_grad);
}

// No float64 copy of the values or of the gradient was ever made for `t`.
void check_no_mirror(const Tensor& t, const char* what) {
    INFO(what);
    CHECK(t.dtype() == xg::kFloat32);
    CHECK(t.node()->value_mirror == Mirror::None);
    CHECK(t.node()->grad_mirror == Mirror::None);
    CHECK(t.node()->value.size() == 0);  // the float64 member holds nothing (the engine empties it)
}

}  // namespace

TEST_CASE("float32 linear forward and backward make no float64 mirror of its input, weight, bias or output",
          "[float32][storage][linear]") {
    const Tensor x = float32_leaf({2, 5, 16}, 1), w = float32_leaf({12, 16}, 2), b = float32_leaf({12}, 3);
    const Tensor y = F::linear(x, w, b);
    CHECK(y.node()->native);
    CHECK(y.shape() == Shape{2, 5, 12});
    y.backward(float32_leaf({2, 5, 12}, 4, false));
    check_no_mirror(y, "output");
    for (const Tensor& t : {x, w, b}) {
        check_no_mirror(t, "input, weight or bias");
        REQUIRE(t.node()->narrow_grad.has_value());
        CHECK(t.grad_values<float>().shape() == t.values<float>().shape());
    }
}

TEST_CASE("float32 Linear module and a batched, broadcast matmul make no float64 mirror", "[float32][storage][linear]") {
    xg::manual_seed(7);
    auto layer = std::make_shared<xg::nn::Linear>(16, 8);
    layer->to(xg::kFloat32);
    const Tensor x = float32_leaf({6, 16}, 5);
    const Tensor y = layer->forward(x);
    y.backward(float32_leaf({6, 8}, 6, false));
    check_no_mirror(x, "input");
    check_no_mirror(y, "output");
    for (const Tensor& p : layer->parameters()) check_no_mirror(p, "parameter");

    const Tensor a = float32_leaf({3, 4, 5}, 8), m = float32_leaf({5, 6}, 9);  // m broadcast over the batch
    const Tensor c = xg::matmul(a, m);
    CHECK(c.node()->native);
    c.backward(float32_leaf({3, 4, 6}, 10, false));
    check_no_mirror(a, "batched operand");
    check_no_mirror(m, "broadcast operand");
    check_no_mirror(c, "product");
}

// The broadcast operand's gradient is the sum over the batch of A_i^T dC_i: the float32 kernel sums
// it by GEMMs with beta = 1. On small integers every product and sum is exact in float32, so it
// must equal the float64 result exactly.
TEST_CASE("float32 matmul sums a broadcast operand's gradient over the batch, as float64 does", "[float32][linear]") {
    const auto integers = [](const Shape& shape, int offset) {
        xg::Array a = xg::Array::from_shape(shape);
        for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = static_cast<double>((static_cast<int>(i) * 7 + offset) % 9 - 4);
        return a;
    };
    const xg::Array av = integers({3, 4, 5}, 1), mv = integers({5, 6}, 2), gv = integers({3, 4, 6}, 3);
    const Tensor a64(av, true), m64(mv, true);
    xg::matmul(a64, m64).backward(Tensor(gv));
    const Tensor a32(av, xg::kFloat32, true), m32(mv, xg::kFloat32, true);
    xg::matmul(a32, m32).backward(Tensor(gv, xg::kFloat32));
    CHECK(bool(xg::to_float64_array(a32.grad_values<float>()) == a64.grad_value()));
    CHECK(bool(xg::to_float64_array(m32.grad_values<float>()) == m64.grad_value()));
}

TEST_CASE("float32 add, sub, mul (a broadcast row, a scalar) and GELU make no float64 mirror", "[float32][storage]") {
    const Tensor x = float32_leaf({6, 8}, 13), y = float32_leaf({6, 8}, 14), row = float32_leaf({8}, 15);
    const Tensor h = F::gelu(x * y + row) - row * 0.5;
    CHECK(h.node()->native);
    h.backward(float32_leaf({6, 8}, 16, false));
    check_no_mirror(h, "result");
    for (const Tensor& t : {x, y, row}) check_no_mirror(t, "operand");
}

TEST_CASE("linear of a float32 input and a float64 weight computes in float64, as PyTorch promotes", "[float32][linear]") {
    const Tensor x = float32_leaf({4, 3}, 11);
    xg::Generator gen(12);
    const Tensor w(xg::randn({2, 3}, gen).value(), true);
    const Tensor y = F::linear(x, w);
    CHECK(y.dtype() == xg::kFloat64);
    const Tensor expected = F::linear(Tensor(xg::to_float64_array(x.values<float>())), w);
    CHECK(bool(y.value() == expected.value()));
}

}  // namespace xg_test_linear_storage
