// Core ops against PyTorch golden values (tests/fixtures/op_*, made by scripts/make_fixtures.py;
// see tests/fixtures/README.md for each computation). Gradients are those of
// sum(out * grad_out), i.e. backward with grad_out as the explicit upstream gradient.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/ops/ops.hpp"
#include "tests/support/fixtures.hpp"

namespace xg_test_ops_golden {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using xg::Array;
using xg::Tensor;
using xg::test::leaf;

namespace {

constexpr double kRtol = 1e-12;  // relative, per element
// Entries PyTorch computes as exactly 0 (underflowed softmax terms) may come out as a few ulps
// of cancellation noise here; this absolute floor is far below any value the fixtures hold.
constexpr double kAtol = 1e-15;

// Compares `actual` with fixture <test_case>/<name> element by element and prints the worst
// relative error, so the test log shows how close to PyTorch each value is.
void expect_golden(const Array& actual, const std::string& test_case, const std::string& name) {
    const Array expected = xg::test::fixture(test_case, name);
    const xg::Shape as(actual.shape().begin(), actual.shape().end()), es(expected.shape().begin(), expected.shape().end());
    INFO(test_case << "/" << name << ": shape " << xg::shape_str(as) << " vs expected " << xg::shape_str(es));
    REQUIRE(as == es);
    double worst_rel = 0.0;
    std::size_t worst_at = 0, violations = 0;
    for (std::size_t i = 0; i < actual.size(); ++i) {
        const double a = actual.data()[i], e = expected.data()[i];
        const double err = std::fabs(a - e);
        if (!(err <= kRtol * std::fabs(e) + kAtol)) ++violations;
        const double rel = e != 0.0 ? err / std::fabs(e) : (err == 0.0 ? 0.0 : err / kAtol * kRtol);
        if (rel > worst_rel) worst_rel = rel, worst_at = i;
    }
    fmt::print("golden {:<22} {:<18} {:>3} elements  max rel err {:.2e}\n", test_case, name, actual.size(), worst_rel);
    INFO("worst element " << worst_at << ": got " << fmt::format("{:.17g}", actual.data()[worst_at]) << ", PyTorch "
                          << fmt::format("{:.17g}", expected.data()[worst_at]) << ", rel err " << worst_rel);
    CHECK(violations == 0);
}

Tensor upstream(const std::string& test_case, const std::string& name = "grad_out") {
    return Tensor(xg::test::fixture(test_case, name));
}

// A row-wise op at logits of +-1000: an output finite everywhere, then out and grad_x against PyTorch.
void check_at_large_logits(const std::string& k, const std::function<Tensor(const Tensor&)>& op) {
    Tensor x = leaf(k, "x");
    Tensor out = op(x);
    out.backward(upstream(k));
    for (double v : out.value()) REQUIRE(std::isfinite(v));
    expect_golden(out.value(), k, "out");
    expect_golden(x.grad_value(), k, "grad_x");
}

}  // namespace

TEST_CASE("golden: broadcast mul-add (2,3,1)*(1,4)+(4,)", "[golden]") {
    const std::string k = "op_broadcast_mul_add";
    Tensor a = leaf(k, "a"), b = leaf(k, "b"), c = leaf(k, "c");
    Tensor out = a * b + c;
    out.backward(upstream(k));
    expect_golden(out.value(), k, "out");
    expect_golden(a.grad_value(), k, "grad_a");
    expect_golden(b.grad_value(), k, "grad_b");
    expect_golden(c.grad_value(), k, "grad_c");
}

TEST_CASE("golden: batched matmul with broadcast batch axes", "[golden]") {
    const std::string k = "op_matmul_batched";
    Tensor a = leaf(k, "a"), b = leaf(k, "b");
    Tensor out = xg::matmul(a, b);
    out.backward(upstream(k));
    expect_golden(out.value(), k, "out");
    expect_golden(a.grad_value(), k, "grad_a");
    expect_golden(b.grad_value(), k, "grad_b");
}

TEST_CASE("golden: var over axes (0,2), unbiased and biased", "[golden]") {
    const std::string k = "op_var_unbiased";
    for (const bool unbiased : {true, false}) {
        const std::string suffix = unbiased ? "unbiased" : "biased";
        Tensor x = leaf(k, "x");
        Tensor out = xg::var(x, {0, 2}, unbiased, true);
        out.backward(upstream(k, "grad_out_" + suffix));
        expect_golden(out.value(), k, "out_" + suffix);
        expect_golden(x.grad_value(), k, "grad_x_" + suffix);
    }
}

TEST_CASE("golden: softmax with logits of +-1000", "[golden]") {
    check_at_large_logits("op_softmax", [](const Tensor& x) { return xg::softmax(x, -1); });
}

TEST_CASE("golden: log_softmax with logits of +-1000", "[golden]") {
    check_at_large_logits("op_log_softmax", [](const Tensor& x) { return xg::log_softmax(x, -1); });
}

TEST_CASE("golden: gather with repeated indices", "[golden]") {
    const std::string k = "op_gather";
    Tensor x = leaf(k, "x");
    Tensor out = xg::gather(x, 1, xg::test::fixture_index(k, "index"));
    out.backward(upstream(k));
    expect_golden(out.value(), k, "out");
    expect_golden(x.grad_value(), k, "grad_x");
}

TEST_CASE("golden: max over axis 1", "[golden]") {
    const std::string k = "op_max";
    Tensor x = leaf(k, "x");
    Tensor out = xg::max(x, {1});
    out.backward(upstream(k));
    expect_golden(out.value(), k, "out");
    expect_golden(x.grad_value(), k, "grad_x");
    // The gradient lands exactly on PyTorch's argmax.
    const xg::IndexArray indices = xg::test::fixture_index(k, "indices");
    for (std::size_t i = 0; i < indices.size(); ++i) {
        const auto j = static_cast<std::size_t>(indices(i));
        CHECK(x(i, j) == out(i));
        CHECK(x.grad_value()(i, j) == upstream(k)(i));
    }
}

TEST_CASE("golden: element-wise unary ops", "[golden]") {
    const std::string k = "op_elementwise";
    struct UnaryCase {
        const char* name;
        const char* input;
        Tensor (*op)(const Tensor&);
    };
    const UnaryCase cases[] = {
        {"exp", "x", [](const Tensor& t) { return xg::exp(t); }},
        {"log", "x", [](const Tensor& t) { return xg::log(t); }},
        {"sqrt", "x", [](const Tensor& t) { return xg::sqrt(t); }},
        {"pow3", "x", [](const Tensor& t) { return xg::pow(t, 3.0); }},
        {"tanh", "x_signed", [](const Tensor& t) { return xg::tanh(t); }},
        {"erf", "x_signed", [](const Tensor& t) { return xg::erf(t); }},
        {"sigmoid", "x_signed", [](const Tensor& t) { return xg::sigmoid(t); }},
        {"relu", "x_signed", [](const Tensor& t) { return xg::relu(t); }},
        {"abs", "x_signed", [](const Tensor& t) { return xg::abs(t); }},
    };
    for (const UnaryCase& op : cases) {
        SECTION(op.name) {
            Tensor x = leaf(k, op.input);
            Tensor out = op.op(x);
            out.backward(upstream(k));
            expect_golden(out.value(), k, std::string("out_") + op.name);
            expect_golden(x.grad_value(), k, std::string("grad_x_") + op.name);
        }
    }
}

}  // namespace xg_test_ops_golden
