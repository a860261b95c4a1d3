// Core ops added for PyTorch parity (issue 13) against PyTorch golden values
// (tests/fixtures/op_trig_clamp, op_min_max_select, op_where_index_select, op_matmul_1d), their
// errors, and the first-program spellings: mean(x, -1), a column literal, backward({true}),
// std::ostream << Tensor and integer indices without xtensor.
#include <cmath>
#include <functional>
#include <limits>
#include <sstream>
#include <tuple>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/io/format.hpp"
#include "core/ops/ops.hpp"
#include "core/engine/random.hpp"
#include "nn/nn.hpp"
#include "tests/support/fixtures.hpp"

namespace xg_test_ops_parity {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using xg::test::as_mask;
using xg::test::leaf;
using xg::test::expect_close;
using Catch::Matchers::Contains;
using test::fixture;
using test::fixture_index;

TEST_CASE("sin, cos and clamp match PyTorch", "[parity][golden]") {
    const std::string k = "op_trig_clamp";
    const Tensor g(fixture(k, "grad_out"));
    const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> ops{
        {"sin", [](const Tensor& x) { return xg::sin(x); }},
        {"cos", [](const Tensor& x) { return xg::cos(x); }},
        {"clamp", [](const Tensor& x) { return clamp(x, -0.5, 0.8); }},
        {"clamp_min", [](const Tensor& x) { return clamp(x, -0.5, std::nullopt); }},
        {"clamp_max", [](const Tensor& x) { return clamp(x, std::nullopt, 0.8); }}};
    for (const auto& [name, f] : ops) {
        Tensor x = leaf(k, "x");
        const Tensor out = f(x);
        out.backward(g);
        expect_close(k + " out_" + name, out.value(), fixture(k, "out_" + name));
        expect_close(k + " grad_x_" + name, x.grad_value(), fixture(k, "grad_x_" + name));
    }
    Tensor edges = leaf(k, "x_edges");
    sum(clamp(edges, -0.5, 0.8)).backward();
    CHECK((edges.grad_value() == fixture(k, "grad_x_edges")));  // 0/1 exactly: bounds count as inside
}

TEST_CASE("clamp keeps NaN and rejects bad bounds", "[parity]") {
    const Tensor x({1.0, std::nan(""), -3.0});
    const Array y = clamp(x, -1.0, 2.0).value();
    CHECK(y(0) == 1.0);
    CHECK(std::isnan(y(1)));
    CHECK(y(2) == -1.0);
    CHECK_THROWS_WITH(clamp(x, std::nullopt, std::nullopt), Contains("clamp") && Contains("min or a max"));
    CHECK_THROWS_WITH(clamp(x, std::nan(""), 1.0), Contains("clamp") && Contains("NaN"));
}

TEST_CASE("maximum and minimum match PyTorch, ties split the gradient", "[parity][golden]") {
    const std::string k = "op_min_max_select";
    for (const std::string name : {"maximum", "minimum"}) {
        Tensor a = leaf(k, "a"), b = leaf(k, "b");
        const Tensor out = name == "maximum" ? maximum(a, b) : minimum(a, b);
        out.backward(Tensor(fixture(k, "grad_out")));
        expect_close(k + " out_" + name, out.value(), fixture(k, "out_" + name));
        expect_close(k + " grad_a_" + name, a.grad_value(), fixture(k, "grad_a_" + name));
        expect_close(k + " grad_b_" + name, b.grad_value(), fixture(k, "grad_b_" + name));
    }
    const Tensor nan_in({1.0, std::nan("")}), other({2.0, 0.0});
    CHECK(std::isnan(maximum(nan_in, other).value()(1)));
    CHECK(std::isnan(minimum(other, nan_in).value()(1)));
    CHECK_THROWS_WITH(maximum(zeros({2, 3}), zeros({4})), Contains("maximum") && Contains("(2, 3)") && Contains("(4,)"));
}

TEST_CASE("min, argmax and argmin match PyTorch (ties: shared gradient, first index)", "[parity][golden]") {
    const std::string k = "op_min_max_select";
    Tensor x = leaf(k, "x");
    const Tensor per_row = xg::min(x, 1);
    per_row.backward(Tensor(fixture(k, "grad_amin1")));
    expect_close(k + " out_amin1", per_row.value(), fixture(k, "out_amin1"));
    expect_close(k + " grad_x_amin1", x.grad_value(), fixture(k, "grad_x_amin1"));
    Tensor y = leaf(k, "x");
    const Tensor all = xg::min(y);
    all.backward();
    expect_close(k + " out_amin", all.value(), fixture(k, "out_amin"));
    expect_close(k + " grad_x_amin", y.grad_value(), fixture(k, "grad_x_amin"));

    for (int axis : {0, 1}) {
        CHECK((argmax(x, axis) == fixture_index(k, "argmax" + std::to_string(axis))));
        CHECK((argmin(x, axis) == fixture_index(k, "argmin" + std::to_string(axis))));
    }
    CHECK((argmax(x) == fixture_index(k, "argmax_all")));
    CHECK((argmin(x) == fixture_index(k, "argmin_all")));
    const IndexArray kept = argmax(x, -1, true);
    CHECK(Shape(kept.shape().begin(), kept.shape().end()) == Shape{4, 1});
    CHECK((argmax(x, -1) == argmax(x, 1)));
}

TEST_CASE("min propagates NaN, argmax treats NaN as the largest, errors name the op", "[parity]") {
    Tensor x({3.0, std::nan(""), 1.0, std::nan("")}, true);
    const Tensor m = xg::min(x);
    CHECK(std::isnan(m.item()));
    m.backward();
    CHECK((x.grad_value() == Array{0.0, 0.5, 0.0, 0.5}));  // the NaNs made the result: they share it
    CHECK(argmax(x)() == 1);
    CHECK(argmin(x)() == 1);
    CHECK(xg::min(Tensor({2.0, 1.0, 1.0})).item() == 1.0);
    CHECK_THROWS_WITH(argmax(zeros({0})), Contains("argmax") && Contains("empty"));
    CHECK_THROWS_WITH(argmin(zeros({2, 0}), 1), Contains("argmin") && Contains("(2, 0)"));
    CHECK_THROWS_WITH(argmax(zeros({2, 3}), 2), Contains("argmax") && Contains("axis 2"));
    CHECK_THROWS_WITH(xg::min(zeros({2, 0}), 1), Contains("min") && Contains("empty"));
}

TEST_CASE("where and index_select match PyTorch", "[parity][golden]") {
    const std::string k = "op_where_index_select";
    Tensor a = leaf(k, "a"), b = leaf(k, "b");
    const Tensor out = xg::where(as_mask(fixture_index(k, "cond")), a, b);
    out.backward(Tensor(fixture(k, "grad_out_where")));
    expect_close(k + " out_where", out.value(), fixture(k, "out_where"));
    expect_close(k + " grad_a_where", a.grad_value(), fixture(k, "grad_a_where"));
    expect_close(k + " grad_b_where", b.grad_value(), fixture(k, "grad_b_where"));

    Tensor x = leaf(k, "x");
    const Tensor sel = index_select(x, 1, fixture_index(k, "index"));
    sel.backward(Tensor(fixture(k, "grad_out_index_select")));
    expect_close(k + " out_index_select", sel.value(), fixture(k, "out_index_select"));
    expect_close(k + " grad_x_index_select", x.grad_value(), fixture(k, "grad_x_index_select"));
}

TEST_CASE("where and index_select reject bad arguments naming the shapes", "[parity]") {
    const Tensor x = zeros({2, 3});
    CHECK_THROWS_WITH(xg::where(Mask{true, false}, x, x), Contains("where") && Contains("(2,)") && Contains("(2, 3)"));
    CHECK_THROWS_WITH(index_select(x, 1, {0, 3}), Contains("index_select") && Contains("index 3") && Contains("extent 3"));
    CHECK_THROWS_WITH(index_select(x, 0, {-1}), Contains("index -1"));
    CHECK_THROWS_WITH(index_select(x, 0, IndexArray{{0, 1}}), Contains("1-D") && Contains("(1, 2)"));
    CHECK_THROWS_WITH(index_select(x, 2, {0}), Contains("index_select") && Contains("axis 2"));
    CHECK_THROWS_WITH(index_select(scalar(1.0), 0, {0}), Contains("0-D"));
}

TEST_CASE("matmul with 1-D operands follows PyTorch", "[parity][golden]") {
    const std::string k = "op_matmul_1d";
    const std::vector<std::tuple<std::string, std::string, std::string>> products{
        {"vw", "v", "w"}, {"mv", "m", "v"}, {"vn", "v", "n"}, {"bmv", "bm", "v"}, {"vbn", "v", "bn"}};
    for (const auto& [name, l, r] : products) {
        Tensor a = leaf(k, l), b = leaf(k, r);
        const Tensor out = matmul(a, b);
        if (out.dim() == 0) {
            out.backward();
        } else {
            out.backward(Tensor(fixture(k, "grad_out_" + name)));
        }
        expect_close(k + " out_" + name, out.value(), fixture(k, "out_" + name));
        expect_close(k + " grad_" + l + "_" + name, a.grad_value(), fixture(k, "grad_" + l + "_" + name));
        expect_close(k + " grad_" + r + "_" + name, b.grad_value(), fixture(k, "grad_" + r + "_" + name));
    }
}

TEST_CASE("first-program spellings: one int axis, a column literal, backward({true})", "[parity]") {
    const Tensor x({{1.0, 2.0, 6.0}, {4.0, 5.0, 9.0}});
    CHECK((mean(x, -1).value() == mean(x, {-1}).value()));
    CHECK(mean(x, 1, true).shape() == Shape{2, 1});
    CHECK((sum(x, 0).value() == sum(x, {0}).value()));
    CHECK((var(x, -1).value() == var(x, {-1}).value()));
    CHECK((xg::max(x, -1).value() == xg::max(x, {-1}).value()));
    CHECK((xg::min(x, std::size_t{0}).value() == xg::min(x, {0}).value()));
    CHECK(sum(x, {}).shape() == Shape{});  // braces still mean every axis
    CHECK(sum(x, {}).item() == 27.0);

    const Tensor column({{1.0}, {2.0}});
    CHECK(column.shape() == Shape{2, 1});
    CHECK(column(1, 0) == 2.0);
    CHECK(Tensor({{1.0, 2.0}}).shape() == Shape{1, 2});
    CHECK(Tensor({1, 2, 3}).shape() == Shape{3});
    CHECK(Tensor({1.5}).shape() == Shape{1});
    CHECK(Tensor({{{1.0, 2.0}}, {{3.0, 4.0}}}).shape() == Shape{2, 1, 2});

    // backward({true}) / backward(true) keep the graph, like retain_graph=True; so does libtorch's
    // positional backward({}, true). The second backward then works and accumulates.
    Tensor w({1.0, 2.0}, true);
    const Tensor loss = sum(w * w);
    loss.backward({true});
    loss.backward(true);
    loss.backward({}, true);
    CHECK((w.grad_value() == Array{6.0, 12.0}));
    loss.backward();  // the last one frees the graph
    CHECK_THROWS_WITH(loss.backward(), Contains("second time"));
    Tensor v({1.0, 2.0}, true);
    const Tensor y = v * 3.0;
    y.backward(Tensor({1.0, 1.0}), true);
    y.backward(Tensor({0.5, 0.0}), false);
    CHECK((v.grad_value() == Array{4.5, 3.0}));
}

TEST_CASE("std::ostream << Tensor prints what fmt prints", "[parity]") {
    const Tensor t({{1.0, -2.5}, {3.0, 4.0}});
    std::ostringstream out;
    out << t;
    CHECK(out.str() == fmt::format("{}", t));
    CHECK(out.str().rfind("tensor([[", 0) == 0);
    std::ostringstream undefined;
    undefined << Tensor();
    CHECK(undefined.str() == "tensor(undefined)");
}

TEST_CASE("indices through xgrad's own API: braces, tensors of whole numbers, to_indices", "[parity]") {
    const Tensor logits = randn({3, 4});
    const double expected = nn::cross_entropy(logits, IndexArray{2, 0, 3}).item();
    CHECK(nn::cross_entropy(logits, {2, 0, 3}).item() == expected);
    CHECK(nn::cross_entropy(logits, Tensor({2, 0, 3})).item() == expected);
    CHECK((to_indices(Tensor({2.0, -1.0, 0.0})) == IndexArray{2, -1, 0}));
    CHECK((to_indices(Array{{1.0, 2.0}}) == IndexArray{{1, 2}}));
    CHECK(argmax(logits, 1).size() == 3);  // predictions are indices too
    CHECK_THROWS_WITH(to_indices(Tensor({1.0, 0.5})), Contains("to_indices") && Contains("0.5"));
    CHECK_THROWS_WITH(to_indices(Tensor({std::numeric_limits<double>::infinity()})), Contains("inf"));
}

}  // namespace xg_test_ops_parity
