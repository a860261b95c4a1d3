// Tensor dtypes (issue 28): PyTorch's promotion rule, to() and convert_in_place, float32 rounding
// on every store (op results, in-place writes, gradient sums), the default dtype, Module::to, an
// optimizer on float32 parameters, gradcheck refusing float32, printing, seeds and xg::grad in
// mixed dtypes, create_graph in float32. Unit tests that `ctest -L float32` also runs ([float32]).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/engine/random.hpp"
#include "core/io/format.hpp"
#include "core/ops/ops.hpp"
#include "core/tools/gradcheck.hpp"
#include "core/tools/transforms.hpp"
#include "nn/nn.hpp"
#include "optim/optim.hpp"

namespace xg_test_engine_dtype {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;

namespace {

// The float32 number nearest to v, as a double.
double f32(double v) { return static_cast<double>(static_cast<float>(v)); }

bool on_float32_grid(const Array& a) {
    for (double v : a) {
        if (f32(v) != v) return false;
    }
    return true;
}

// Sets the default dtype for its scope and restores the previous one.
class DefaultDtype {
public:
    explicit DefaultDtype(Dtype d) : previous_(default_dtype()) { set_default_dtype(d); }
    ~DefaultDtype() { set_default_dtype(previous_); }
    DefaultDtype(const DefaultDtype&) = delete;
    DefaultDtype& operator=(const DefaultDtype&) = delete;

private:
    Dtype previous_;
};

Tensor leaf(std::initializer_list<double> values, Dtype dtype, bool requires_grad = false) {
    Array a = Array::from_shape({values.size()});
    std::copy(values.begin(), values.end(), a.begin());
    return Tensor(std::move(a), dtype, requires_grad);
}

}  // namespace

TEST_CASE("dtype: names, unit roundoff and promote_types", "[float32]") {
    CHECK(std::string(dtype_name(kFloat32)) == "float32");
    CHECK(std::string(dtype_name(kFloat64)) == "float64");
    CHECK(kFloat == kFloat32);
    CHECK(kDouble == kFloat64);
    CHECK(unit_roundoff(kFloat32) == std::ldexp(1.0, -24));
    CHECK(unit_roundoff(kFloat64) == std::ldexp(1.0, -53));
    CHECK(promote_types(kFloat32, kFloat64) == kFloat64);
    CHECK(promote_types(kFloat64, kFloat32) == kFloat64);
    CHECK(promote_types(kFloat32, kFloat32) == kFloat32);
    CHECK(default_dtype() == kFloat64);
}

TEST_CASE("dtype promotion follows PyTorch: tensors with axes decide, 0-D only among 0-D, C++ numbers never", "[float32]") {
    const Tensor m32 = ones({2, 3}, kFloat32), m64 = ones({2, 3}, kFloat64), row64 = ones({3}, kFloat64);
    const Tensor s32 = scalar(0.5, kFloat32), s64 = scalar(0.1, kFloat64);
    // float32 matrix with a float64 matrix (same shape or broadcast): float64
    CHECK((m32 * m64).dtype() == kFloat64);
    CHECK((m32 + row64).dtype() == kFloat64);
    CHECK(matmul(m32, transpose(m64, 0, 1)).dtype() == kFloat64);
    CHECK(cat({m32, m64}, 0).dtype() == kFloat64);
    CHECK(xg::where(Mask{true, false, true}, m32, m64).dtype() == kFloat64);
    // float32 matrix with a float64 0-D tensor: float32, and rounded to it
    const Tensor scaled = m32 * s64;
    CHECK(scaled.dtype() == kFloat32);
    CHECK(scaled.value()(0, 0) == f32(0.1));
    CHECK((s64 + m32).dtype() == kFloat32);
    // 0-D with 0-D: promoted among themselves
    CHECK((s32 * s64).dtype() == kFloat64);
    CHECK((s32 * s32).dtype() == kFloat32);
    // a C++ double takes the tensor's dtype, and the result is rounded to it
    const Tensor doubled = m32 * 2.0, tenth = m32 * 0.1;
    CHECK(doubled.dtype() == kFloat32);
    CHECK((0.1 + m32).dtype() == kFloat32);
    CHECK((s32 / 3.0).dtype() == kFloat32);
    CHECK(tenth.value()(1, 2) == f32(0.1));
    CHECK((s32 / 3.0).item() == f32(0.5 / 3.0));
    // the rule itself
    CHECK(result_dtype({m32, s64}) == kFloat32);
    CHECK(result_dtype({s32, s64}) == kFloat64);
    CHECK(result_dtype({}) == default_dtype());
}

TEST_CASE("dtype promotion: each input of a mixed op gets its gradient in its own dtype", "[float32]") {
    const Tensor a = leaf({0.1, 0.2, 0.3}, kFloat32, true), b = leaf({1.0 / 3.0, 2.0, -1.5}, kFloat64, true);
    const Tensor y = sum(a * b);
    REQUIRE(y.dtype() == kFloat64);
    y.backward();
    CHECK(a.grad().dtype() == kFloat32);
    CHECK(b.grad().dtype() == kFloat64);
    CHECK(a.grad_value()(0) == f32(1.0 / 3.0));  // b, rounded to a's dtype
    CHECK(b.grad_value()(0) == f32(0.1));        // a's float32 value, exact in float64
}

TEST_CASE("to(dtype): a differentiable copy both ways, and the same dtype returns the same node", "[float32]") {
    const Tensor x64 = leaf({0.1, -2.5, 1e-3}, kFloat64, true);
    const Tensor x32 = x64.to(kFloat32);
    CHECK(x32.dtype() == kFloat32);
    CHECK(x32.op() == "to");
    CHECK(x32.value()(0) == f32(0.1));
    CHECK(x32.value()(0) != 0.1);
    CHECK(x64.to(kFloat64).node() == x64.node());
    CHECK(x32.to(kFloat32).node() == x32.node());

    // float64 -> float32: the gradient comes back as float64 (its float32 values)
    sum(x32 * 0.1).backward();
    CHECK(x64.grad().dtype() == kFloat64);
    CHECK(x64.grad_value()(1) == f32(0.1));

    // float32 -> float64: the float64 gradient is rounded to float32 on the way back
    const Tensor w32 = leaf({1.0, 2.0}, kFloat32, true);
    const Tensor w64 = w32.to(kFloat64);
    CHECK(w64.dtype() == kFloat64);
    CHECK(w64.value()(1) == 2.0);
    sum(w64 * 0.1).backward();
    CHECK(w32.grad().dtype() == kFloat32);
    CHECK(w32.grad_value()(0) == f32(0.1));
    CHECK(w32.grad_value()(0) == 0.100000001490116119384765625);

    // a tensor without a graph converts to a leaf
    const Tensor plain = ones({2}, kFloat64).to(kFloat32);
    CHECK(plain.is_leaf());
    CHECK(plain.dtype() == kFloat32);
}

TEST_CASE("float32 rounds on every store: results, factories, braced values, in-place writes at the next read", "[float32]") {
    CHECK(scalar(0.1, kFloat32).item() == f32(0.1));
    CHECK(scalar(0.1, kFloat32).item() == 0.100000001490116119384765625);
    CHECK(full({2}, 0.1, kFloat32).value()(1) == f32(0.1));
    CHECK(Tensor(Array{0.1, 0.2}, kFloat32).value()(1) == f32(0.2));
    CHECK(on_float32_grid(arange(0.0, 1.0, 0.1, kFloat32).value()));
    CHECK(arange(0.0, 1.0, 0.1, kFloat32).dtype() == kFloat32);
    CHECK((scalar(1.0, kFloat32) / 3.0).item() == f32(1.0 / 3.0));
    CHECK(exp(scalar(1.0, kFloat32)).item() == f32(std::exp(1.0)));
    CHECK(zeros_like(scalar(1.0, kFloat32)).dtype() == kFloat32);
    CHECK(ones_like(ones({2}, kFloat32)).dtype() == kFloat32);

    // mutable_value and data() hand out double storage; a write is rounded at the next read
    Tensor t = zeros({3}, kFloat32);
    t.mutable_value()(0) = 0.1;
    t.data()[2] = 1.0 + std::ldexp(1.0, -30);
    CHECK(t.value()(0) == f32(0.1));
    CHECK(t(2) == 1.0);
    CHECK(on_float32_grid(t.value()));
    // a writer may ask for the shape between taking the storage and writing it
    Tensor u = zeros({2}, kFloat32);
    double* storage = u.data();
    CHECK(u.shape() == Shape{2});
    CHECK(u.size(0) == 2);
    storage[1] = 0.1;
    CHECK(u.value()(1) == f32(0.1));
    // and the same for a written gradient
    Tensor p = ones({2}, kFloat32, true);
    sum(p).backward();
    p.mutable_grad()(1) = 0.2;
    CHECK(p.grad_value()(1) == f32(0.2));
    CHECK(p.grad().value()(1) == f32(0.2));
    // a float64 tensor keeps what it is given
    Tensor d = zeros({1}, kFloat64);
    d.mutable_value()(0) = 0.1;
    CHECK(d.value()(0) == 0.1);
}

TEST_CASE("float32 gradients are summed in float32: 2^24 + 1 rounds to 2^24", "[float32]") {
    const double two24 = std::ldexp(1.0, 24);
    // two parts of one backward: 2^24 (through one use of x) and 1 (through the other)
    for (Dtype dtype : {kFloat32, kFloat64}) {
        const Tensor x = scalar(1.0, dtype, true);
        (x * two24 + x * 1.0).backward();
        CHECK(x.grad().dtype() == dtype);
        CHECK(x.grad().item() == (dtype == kFloat32 ? two24 : two24 + 1.0));
    }
    // xg::grad sums the same way
    const Tensor x = scalar(1.0, kFloat32, true);
    CHECK(grad({x * two24 + x * 1.0}, {x})[0].item() == two24);
    // two backward calls accumulating into .grad: the sum is a float32 store too
    for (Dtype dtype : {kFloat32, kFloat64}) {
        const Tensor y = scalar(1.0, dtype, true);
        (y * two24).backward();
        (y * 1.0).backward();
        CHECK(y.grad().item() == (dtype == kFloat32 ? two24 : two24 + 1.0));
        CHECK(y.grad_value()(0) == (dtype == kFloat32 ? two24 : two24 + 1.0));
    }
}

TEST_CASE("default dtype: factories, random tensors and braced lists follow it, set and restored", "[float32]") {
    REQUIRE(default_dtype() == kFloat64);
    {
        DefaultDtype scope(kFloat32);
        CHECK(default_dtype() == kFloat32);
        CHECK(zeros({2}).dtype() == kFloat32);
        CHECK(ones({2}).dtype() == kFloat32);
        CHECK(full({2}, 0.1).value()(0) == f32(0.1));
        CHECK(scalar(0.1).item() == f32(0.1));
        CHECK(arange(3.0).dtype() == kFloat32);
        Generator gen(3);
        const Tensor r = randn({50}, gen);
        CHECK(r.dtype() == kFloat32);
        CHECK(on_float32_grid(r.value()));
        CHECK(rand({4}).dtype() == kFloat32);
        CHECK(Tensor(Array{0.1}).value()(0) == f32(0.1));
        const Tensor list{0.1, 0.2, 0.3};
        CHECK(list.dtype() == kFloat32);
        CHECK(list(2) == f32(0.3));
        const Tensor nested({{0.1, 0.2}, {0.3, 0.4}});
        CHECK(nested.dtype() == kFloat32);
        CHECK(nested(1, 1) == f32(0.4));
        // an op with no tensor inputs, and a float64 tensor made explicitly
        CHECK(result_dtype({}) == kFloat32);
        CHECK(ones({2}, kFloat64).dtype() == kFloat64);
        // a BatchNorm made under the float32 default: float32 parameters and running statistics, but its
        // batch counter stays float64 (an int64 in files) so that it counts exactly past 2^24
        xg::nn::BatchNorm1d bn(3);
        CHECK(bn.weight.dtype() == kFloat32);
        CHECK(bn.running_mean.dtype() == kFloat32);
        CHECK(bn.num_batches_tracked.dtype() == kFloat64);
        // printing shows the dtype that is not the default: now float64
        CHECK(to_string(ones({2}, kFloat64)).find("dtype=float64") != std::string::npos);
        CHECK(to_string(ones({2})).find("dtype") == std::string::npos);
    }
    CHECK(default_dtype() == kFloat64);
    CHECK(zeros({2}).dtype() == kFloat64);
    CHECK(Tensor{0.1}.value()(0) == 0.1);
}

TEST_CASE("convert_in_place: a leaf's value and gradient change dtype for every handle, a non-leaf is refused", "[float32]") {
    Tensor x = Tensor(Array{0.1, 0.7}, kFloat64, true);
    sum(x * 0.3).backward();
    const Tensor alias = x;
    const auto version = x.node()->version;
    x.convert_in_place(kFloat32);
    CHECK(alias.dtype() == kFloat32);
    CHECK(alias.value()(0) == f32(0.1));
    CHECK(alias.grad().dtype() == kFloat32);
    CHECK(alias.grad_value()(1) == f32(0.3));
    CHECK(x.node()->version > version);  // a new version, like any in-place change
    CHECK(x.requires_grad());
    // and back: float32 values are exact in float64
    x.convert_in_place(kFloat64);
    CHECK(alias.dtype() == kFloat64);
    CHECK(alias.value()(0) == f32(0.1));
    const auto same = x.node()->version;
    x.convert_in_place(kFloat64);  // the same dtype: nothing happens
    CHECK(x.node()->version == same);

    const Tensor y = x * 2.0;
    Tensor non_leaf = y;
    REQUIRE_THROWS_AS(non_leaf.convert_in_place(kFloat32), Error);
    REQUIRE_THROWS_WITH(non_leaf.convert_in_place(kFloat32), Catch::Contains("to") && Catch::Contains("leaf") && Catch::Contains("mul"));
    CHECK(y.dtype() == kFloat64);
}

TEST_CASE("Module::to(kFloat32) converts parameters, gradients and floating buffers, and num_batches_tracked stays", "[float32]") {
    manual_seed(7);
    auto model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(3, 4), std::make_shared<nn::BatchNorm1d>(4), std::make_shared<nn::Linear>(4, 2)});
    Generator gen(8);
    const Tensor x64 = randn({5, 3}, gen);
    sum(model->forward(x64)).backward();  // float64 gradients and a batch counted
    nn::Module& same = model->to(kFloat32);
    CHECK(&same == model.get());
    for (const auto& [name, p] : model->named_parameters()) {
        INFO(name);
        CHECK(p.dtype() == kFloat32);
        CHECK(on_float32_grid(p.value()));
        REQUIRE(p.has_grad());
        CHECK(p.grad().dtype() == kFloat32);
        CHECK(on_float32_grid(p.grad_value()));
    }
    for (const auto& [name, b] : model->named_buffers()) {
        INFO(name);
        if (name.find("num_batches_tracked") != std::string::npos) {
            CHECK(b.dtype() == kFloat64);  // an int64 buffer in files: not a floating buffer
            CHECK(b.item() == 1.0);
        } else {
            CHECK(b.dtype() == kFloat32);
            CHECK(on_float32_grid(b.value()));
        }
    }
    // a float32 forward and backward from then on
    model->zero_grad();
    const Tensor x32 = x64.to(kFloat32);
    const Tensor y = model->forward(x32);
    CHECK(y.dtype() == kFloat32);
    sum(y).backward();
    for (const Tensor& p : model->parameters()) {
        CHECK(p.grad().dtype() == kFloat32);
        CHECK(on_float32_grid(p.grad_value()));
    }
}

TEST_CASE("an optimizer step on float32 parameters keeps them and its state float32", "[float32]") {
    manual_seed(9);
    nn::Linear layer(3, 2);
    layer.to(kFloat32);
    optim::Adam adam(layer.parameters(), optim::AdamOptions(0.01));
    nn::Linear other(3, 2);
    other.to(kFloat32);
    optim::SGD sgd(other.parameters(), optim::SGDOptions(0.1).momentum(0.9));
    Generator gen(10);
    const Tensor x = randn({4, 3}, gen).to(kFloat32);
    for (int step = 0; step < 3; ++step) {
        adam.zero_grad(), sgd.zero_grad();
        sum(layer.forward(x) * layer.forward(x)).backward();
        sum(other.forward(x) * other.forward(x)).backward();
        adam.step(), sgd.step();
    }
    for (nn::Linear* m : {&layer, &other}) {
        for (const Tensor& p : m->parameters()) {
            CHECK(p.dtype() == kFloat32);
            CHECK(on_float32_grid(p.value()));
        }
    }
    for (const optim::Optimizer* o : {static_cast<const optim::Optimizer*>(&adam), static_cast<const optim::Optimizer*>(&sgd)}) {
        std::size_t buffers = 0;
        for (const auto& [key, value] : o->state_dict()) {
            if (key.rfind("state.", 0) != 0 || key.find(".step") != std::string::npos) continue;
            INFO(o->name() << " " << key);
            CHECK(on_float32_grid(value));
            ++buffers;
        }
        CHECK(buffers >= 2);  // the state was looked at
    }
}

TEST_CASE("gradcheck and gradgradcheck refuse float32 inputs and say why", "[float32]") {
    const SingleFunction f = [](const std::vector<Tensor>& x) { return sum(x[0] * x[0]); };
    const Tensor x32 = ones({2}, kFloat32, true);
    GradcheckOptions options;
    options.name = "square";
    REQUIRE_THROWS_WITH(gradcheck(f, {x32}, options), Catch::Contains("gradcheck") && Catch::Contains("float32") &&
                                                          Catch::Contains("finite differences need float64") &&
                                                          Catch::Contains("square"));
    REQUIRE_THROWS_WITH(gradgradcheck(f, {x32}, options), Catch::Contains("gradgradcheck") && Catch::Contains("float32"));
    CHECK(gradcheck(f, {ones({2}, kFloat64, true)}, options).ok);  // float64 stays the checker
}

TEST_CASE("printing shows dtype=float32 when it is not the default", "[float32]") {
    const std::string s32 = to_string(Tensor(Array{0.5, 1.5}, kFloat32, true));
    CHECK(s32.find(", dtype=float32") != std::string::npos);
    CHECK(s32.find("requires_grad=true") != std::string::npos);
    CHECK(to_string(Tensor(Array{0.5, 1.5}, kFloat64)).find("dtype") == std::string::npos);
    CHECK(to_string(ones({2}, kFloat32) * 2.0).find("dtype=float32") != std::string::npos);
}

TEST_CASE("backward with a float64 seed on a float32 root rounds the seed to float32", "[float32]") {
    const Tensor x = Tensor(Array{1.0, 2.0}, kFloat32, true);
    const Tensor y = x * 3.0;
    y.backward(Tensor(Array{0.1, 0.2}, kFloat64));
    CHECK(x.grad().dtype() == kFloat32);
    CHECK(x.grad_value()(0) == f32(f32(0.1) * 3.0));
    CHECK(x.grad_value()(1) == f32(f32(0.2) * 3.0));
    // a float32 seed on a float64 root is exact
    const Tensor z = Tensor(Array{1.0}, kFloat64, true);
    (z * 3.0).backward(Tensor(Array{0.1}, kFloat32));
    CHECK(z.grad().dtype() == kFloat64);
    CHECK(z.grad_value()(0) == f32(0.1) * 3.0);
}

TEST_CASE("xg::grad returns each gradient in its input's dtype, also for float64 grad_outputs", "[float32]") {
    const Tensor a = Tensor(Array{0.3, 0.6}, kFloat32, true), b = Tensor(Array{0.7, 1.1}, kFloat64, true);
    const Tensor y = a * b;
    REQUIRE(y.dtype() == kFloat64);
    const std::vector<Tensor> g = grad({y}, {a, b}, {Tensor(Array{1.0, 0.1}, kFloat64)});
    CHECK(g[0].dtype() == kFloat32);
    CHECK(g[1].dtype() == kFloat64);
    CHECK(g[0].value()(1) == f32(0.1 * 1.1));
    CHECK(g[1].value()(1) == 0.1 * f32(0.6));
    // a float32 output with a float64 grad_output: rounded first
    const Tensor z = a * 2.0;
    const Tensor ga = grad({z}, {a}, {Tensor(Array{0.1, 0.1}, kFloat64)})[0];
    CHECK(ga.dtype() == kFloat32);
    CHECK(ga.value()(0) == f32(f32(0.1) * 2.0));
}

TEST_CASE("create_graph in float32: first and second derivatives are float32 tensors", "[float32]") {
    Tensor x = Tensor(Array{0.3, -1.2, 2.1}, kFloat32, true);
    const Tensor y = sum(pow(x, 3.0));
    const Tensor g = grad({y}, {x}, {}, {false, true, false})[0];
    CHECK(g.dtype() == kFloat32);
    CHECK(g.requires_grad());
    CHECK(on_float32_grid(g.value()));
    const Tensor h = grad({sum(g)}, {x})[0];  // d/dx sum(3 x^2) = 6 x
    CHECK(h.dtype() == kFloat32);
    for (std::size_t i = 0; i < 3; ++i) CHECK(h.value()(i) == Approx(6.0 * x.value()(i)).epsilon(4 * unit_roundoff(kFloat32)));
    CHECK(on_float32_grid(h.value()));
    // backward(create_graph): .grad is a float32 tensor of the graph
    y.backward(BackwardOptions{false, true});
    CHECK(x.grad().dtype() == kFloat32);
    CHECK(x.grad().requires_grad());
    const Tensor h2 = grad({sum(x.grad() * x.grad())}, {x})[0];  // d/dx sum(9 x^4) = 36 x^3
    CHECK(h2.dtype() == kFloat32);
    x.zero_grad();  // breaks the cycle through .grad's graph
}

TEST_CASE("vjp, jvp, jacobian, hessian and hvp of a float32 function give float32 results", "[float32]") {
    const Tensor x = Tensor(Array{0.3, -1.2, 2.1}, kFloat32);
    const TensorFunction cube = [](const Tensor& t) { return pow(t, 3.0) * 0.1; };
    const TensorFunction total = [](const Tensor& t) { return sum(pow(t, 3.0)); };
    const Tensor v = Tensor(Array{1.0, 0.1, -2.0}, kFloat64);  // float64 directions are rounded like seeds
    const auto [y, vJ] = vjp(cube, x, v);
    CHECK(y.dtype() == kFloat32);
    CHECK(vJ.dtype() == kFloat32);
    CHECK(on_float32_grid(vJ.value()));
    const auto [y2, Ju] = jvp(cube, x, v);
    CHECK(Ju.dtype() == kFloat32);
    CHECK(on_float32_grid(Ju.value()));
    CHECK(jacobian(cube, x).dtype() == kFloat32);
    CHECK(hessian(total, x).dtype() == kFloat32);
    const auto [y3, Hv] = hvp(total, x, v);
    CHECK(Hv.dtype() == kFloat32);
    CHECK(on_float32_grid(Hv.value()));
    // d/dx 0.1 x^3 = 0.3 x^2 on the diagonal, rounded to float32
    const Tensor J = jacobian(cube, x);
    CHECK(J.value()(2, 2) == Approx(0.3 * x(2) * x(2)).epsilon(4 * unit_roundoff(kFloat32)));
    // a function that does not depend on x: zeros of x's dtype
    CHECK(vjp([](const Tensor& t) { return t.detach() * 2.0; }, x, Tensor(Array{1.0, 1.0, 1.0}, kFloat32)).second.dtype() == kFloat32);
}

}  // namespace xg_test_engine_dtype
