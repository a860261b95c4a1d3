// Native float32 storage (issue 28 part 2): a float32 tensor keeps its values and gradient in
// float32 arrays; value() widens into a float64 mirror kept with the node; writes through the
// mirror are rounded into the float32 storage at the next read; a native float32 op (record()
// given a FloatArray) reads and returns float32 without any mirror; the walk sums float32
// gradients in float32. Unit tests that `ctest -L float32` also runs ([float32]).
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "core/ops/ops.hpp"
#include "nn/nn.hpp"
#include "tests/support/error_matchers.hpp"

namespace xg_test_engine_storage {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using Mirror = Node::Mirror;

namespace {

// y = 3x as a native float32 kernel: forward and backward on float32 storage only.
Tensor triple32(const Tensor& x) {
    const FloatArray& xv = x.values<float>();
    FloatArray y = FloatArray::from_shape(xv.shape());
    for (std::size_t i = 0; i < xv.size(); ++i) y.data()[i] = 3.0f * xv.data()[i];
    return record("triple32", std::move(y), {x}, [](const GradContext& c) -> Grads {
        const FloatArray& g = c.grad_values<float>();
        FloatArray dx = FloatArray::from_shape(g.shape());
        for (std::size_t i = 0; i < g.size(); ++i) dx.data()[i] = 3.0f * g.data()[i];  // d(3x)/dx = 3
        return {std::move(dx)};
    });
}

}  // namespace

TEST_CASE("a float32 tensor stores float32 and widens into a mirror only when read as float64", "[float32][storage]") {
    Tensor x = Tensor({1.0, 0.1, -2.5}).to(kFloat32);
    const Node& n = *x.node();
    CHECK(n.dtype == Dtype::Float32);
    CHECK(std::get<FloatArray>(n.narrow_value).size() == 3);
    CHECK(n.value.size() == 0);
    CHECK(n.value_mirror == Mirror::None);
    CHECK(x.values<float>()(1) == 0.1f);
    CHECK(n.value_mirror == Mirror::None);
    CHECK(x.shape() == Shape{3});
    CHECK(x.numel() == 3);
    const Array& v = x.value();  // the mirror: float32 values, widened
    CHECK(n.value_mirror == Mirror::Clean);
    CHECK(v(1) == static_cast<double>(0.1f));
    CHECK(&x.value() == &v);  // made once, kept
}

TEST_CASE("writes through the float64 mirror are rounded into float32 storage at the next read", "[float32][storage]") {
    Tensor x = Tensor::from_float32(FloatArray{1.0f, 2.0f});
    const Array& before = x.value();
    x.mutable_value()(0) = 0.1;
    CHECK(x.node()->value_mirror == Mirror::Written);
    CHECK(x.values<float>()(0) == 0.1f);  // settled: narrowed
    CHECK(x.value()(0) == static_cast<double>(0.1f));  // the mirror holds the stored value again
    CHECK(&x.value() == &before);  // a reference handed out earlier still sees the tensor
    x.mutable_values<float>()(1) = 5.0f;  // a native write leaves the mirror stale until it is read
    CHECK(x.node()->value_mirror == Mirror::Stale);
    CHECK(before(1) == 2.0);
    CHECK(x.value()(1) == 5.0);
    CHECK(before(1) == 5.0);  // refreshed in its own buffer
}

TEST_CASE("values<T>() refuses the other dtype with the shapes and dtypes named", "[float32][storage]") {
    const Tensor x = zeros({2, 3});
    REQUIRE_ERROR(x.values<float>(), "values", "float32", "float64", "(2, 3)");
    const Tensor y = zeros({2}, kFloat32);
    REQUIRE_ERROR(y.values<double>(), "float64", "float32");
    REQUIRE_ERROR(y.grad_values<float>(), "no gradient");
}

TEST_CASE("a native float32 op makes no float64 mirror in forward or backward", "[float32][storage]") {
    Tensor x = Tensor::from_float32(FloatArray{1.0f, -2.0f, 0.5f}, true);
    Tensor y = triple32(triple32(x));
    CHECK(y.dtype() == kFloat32);
    CHECK(y.node()->native);
    y.backward(Tensor::from_float32(FloatArray{1.0f, 1.0f, 0.25f}));
    CHECK(x.node()->value_mirror == Mirror::None);
    CHECK(y.node()->value_mirror == Mirror::None);
    CHECK(x.node()->grad_mirror == Mirror::None);
    CHECK(x.grad_values<float>() == FloatArray{9.0f, 9.0f, 2.25f});
    // a second backward adds to .grad in float32
    Tensor z = triple32(x);
    z.backward(Tensor::from_float32(FloatArray{1.0f, 0.0f, 0.0f}));
    CHECK(x.grad_values<float>() == FloatArray{12.0f, 9.0f, 2.25f});
    CHECK(x.grad().dtype() == kFloat32);
}

TEST_CASE("float32 gradient parts from several consumers sum in float32", "[float32][storage]") {
    // x feeds a native op and an ordinary (float64-computing) op: the walk converts the float64
    // route's part to float32 and adds the two in float32.
    Tensor x = Tensor::from_float32(FloatArray{1.0f, 2.0f}, true);
    Tensor y = triple32(x) + x * 0.1;
    y.backward(Tensor::from_float32(FloatArray{1.0f, 1.0f}));
    const float expected = 3.0f + static_cast<float>(0.1);  // each part rounded, then a float32 add
    CHECK(x.grad_values<float>()(0) == expected);
    CHECK(x.grad().dtype() == kFloat32);
    CHECK(y.dtype() == kFloat32);
}

TEST_CASE("a float32 gradient written through mutable_grad() is rounded into grad32", "[float32][storage]") {
    Tensor w = Tensor::from_float32(FloatArray{1.0f}, true);
    sum(w * 2.0).backward();
    w.mutable_grad()(0) = 0.1;
    CHECK(w.grad_values<float>()(0) == 0.1f);
    CHECK(w.grad_value()(0) == static_cast<double>(0.1f));
    w.zero_grad();
    CHECK(!w.has_grad());
    w.set_grad(Array{0.3});
    CHECK(w.grad_values<float>()(0) == 0.3f);
}

TEST_CASE("Module::to(kFloat32) moves parameters into float32 storage and back", "[float32][storage]") {
    nn::Linear layer(3, 2);
    const double w00 = layer.weight.value()(0, 0);
    layer.to(kFloat32);
    CHECK(std::get<FloatArray>(layer.weight.node()->narrow_value).size() == 6);
    CHECK(layer.weight.node()->value.size() == 0);
    CHECK(layer.weight.values<float>()(0, 0) == static_cast<float>(w00));
    layer.to(kFloat64);
    CHECK(std::get<FloatArray>(layer.weight.node()->narrow_value).size() == 0);
    CHECK(layer.weight.value()(0, 0) == static_cast<double>(static_cast<float>(w00)));
}

TEST_CASE("to() between dtypes stores the result natively", "[float32][storage]") {
    Tensor x = Tensor({0.1, 0.2}, true);
    Tensor y = x.to(kFloat32);
    CHECK(std::get<FloatArray>(y.node()->narrow_value).size() == 2);
    CHECK(y.node()->value.size() == 0);
    Tensor z = y.to(kFloat64);
    CHECK(z.node()->value.size() == 2);
    CHECK(std::get<FloatArray>(z.node()->narrow_value).size() == 0);
    sum(z).backward();
    CHECK(x.grad_value() == Array{1.0, 1.0});
    CHECK(y.node()->value_mirror == Mirror::None);  // to(float64) read y natively
}

}  // namespace xg_test_engine_storage
