// What the golden-value tests share (tests/<area>/test_<area>_golden.cpp): a case that compares
// xgrad's arrays with PyTorch's fixtures (tests/fixtures/README.md) and prints its worst relative
// difference; an op with a fused and a composed form checked against one fixture folder
// (TwinOp); the steps of a module's golden test (load its parameters, backpropagate the fixture's
// grad_out, compare a list of named arrays); second derivatives against PyTorch's double backward.
#pragma once

#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/engine/tensor.hpp"
#include "core/ops/ops.hpp"
#include "nn/modules/module.hpp"
#include "tests/support/fixtures.hpp"

namespace xg::test::golden {

// The fixture readers too, so that `using namespace xg::test::golden;` is all a golden test needs.
using xg::test::expect_close;
using xg::test::fixture;
using xg::test::fixture_index;
using xg::test::leaf;
using xg::test::max_rel_diff;

/// The relative tolerance of a float64 result against PyTorch's float64 one.
constexpr double kTol = 1e-12;

/// The leaves a case's function receives, in the order their fixture names are listed.
using Leaves = std::vector<Tensor>;

/// Tracks the worst relative difference of one case (its name's first word is the fixture's
/// folder) and prints it at the end.
struct Golden {
    std::string name;
    double tol = kTol;
    double worst = 0.0;

    void expect(const Array& got, const std::string& file) {
        const double d = max_rel_diff(got, fixture(name.substr(0, name.find(' ')), file));
        INFO(name << " " << file << ": max relative difference " << d);
        CHECK(d <= tol);
        worst = std::max(worst, d);
    }
    ~Golden() { fmt::print("golden {:<34} worst rel err vs PyTorch {:.2e}\n", name, worst); }
};

/// The fixture array `name` of `test_case` as a leaf.
inline Tensor load(const std::string& test_case, const std::string& name, bool requires_grad = true) {
    return Tensor(fixture(test_case, name), requires_grad);
}

/// The suffix naming which of an op's two forms a case ran.
inline const char* twin(bool composed) { return composed ? " (composed)" : " (fused)"; }

/// An op with a fused and a composed form, against the fixture folder `fixture`: its leaves are
/// the fixture arrays named `leaves` (in order) and `run(leaves, composed)` is its output.
struct TwinOp {
    std::string fixture;
    std::vector<std::string> leaves;
    std::function<Tensor(const Leaves&, bool composed)> run;
    double tol = kTol;
};

/// The fused form, then the composed one, each as one Golden case "<fixture> (fused)" or
/// "<fixture> (composed)": out, then grad_<leaf> of sum(out * grad_out) for every leaf in order.
inline void check_twins(const TwinOp& op) {
    for (bool composed : {false, true}) {
        Golden g{op.fixture + twin(composed), op.tol};
        Leaves leaves;
        for (const std::string& name : op.leaves) leaves.push_back(load(op.fixture, name));
        Tensor y = op.run(leaves, composed);
        y.backward(load(op.fixture, "grad_out", false));
        g.expect(y.value(), "out");
        for (std::size_t i = 0; i < leaves.size(); ++i) g.expect(leaves[i].grad_value(), "grad_" + op.leaves[i]);
    }
}

/// Backpropagates sum(out * grad_out) with grad_out the fixture array <test_case>/<name> (the
/// fixtures' convention for a non-scalar output).
inline void backward_from_fixture(const Tensor& out, const std::string& test_case, const std::string& name = "grad_out") {
    out.backward(Tensor(fixture(test_case, name)));
}

/// An array of xgrad's and the fixture it must match.
using Named = std::pair<std::string, Array>;

/// expect_close of each named array, in order, against the fixture <test_case>/<name><suffix>,
/// printed as "<what> <name>".
inline void expect_fixtures(const std::string& what, const std::string& test_case, const std::vector<Named>& got,
                            const std::string& suffix = "") {
    for (const auto& [name, value] : got) expect_close(what + " " + name, value, fixture(test_case, name + suffix));
}

/// Loads every parameter of m from the fixture files named after it (plus the variant suffix).
inline void load_parameters(nn::Module& m, const std::string& test_case, const std::string& suffix = "") {
    NamedArrays state;
    for (const auto& [name, p] : m.named_parameters()) state.emplace_back(name, fixture(test_case, name + suffix));
    m.load_state_dict(state);
}

/// Every parameter's gradient against grad_<name> (plus the variant suffix).
inline void expect_parameter_grads(const std::string& what, nn::Module& m, const std::string& test_case,
                                   const std::string& suffix = "") {
    for (const auto& [name, p] : m.named_parameters()) {
        expect_close(what + " grad_" + name, p.grad_value(), fixture(test_case, "grad_" + name + suffix));
    }
}

/// A one-input module against the fixture folder `test_case`: its parameters loaded from there,
/// out = forward(x), then grad_x and every parameter's gradient of sum(out * grad_out), each
/// printed as "<what> <name>".
inline void check_module(const std::string& what, nn::Module& m, const std::string& test_case) {
    load_parameters(m, test_case);
    const Tensor x = leaf(test_case, "x");
    const Tensor out = m.forward(x);
    expect_fixtures(what, test_case, {{"out", out.value()}});
    backward_from_fixture(out, test_case);
    expect_fixtures(what, test_case, {{"grad_x", x.grad_value()}});
    expect_parameter_grads(what, m, test_case);
}

/// Row `step` of a (steps, C) table of running statistics.
inline void put_row(Array& table, std::size_t step, const Tensor& t) {
    std::copy(t.value().begin(), t.value().end(), table.begin() + static_cast<long>(step * t.numel()));
}

/// One variant `tag` of a second-order fixture `k` (double_backward_fused, mlp_hvp): f's output,
/// its first-order gradients with create_graph, then the gradient of sum_i sum(grad_i * u_i), each
/// against PyTorch's double backward. `scalar`: f returns a scalar and needs no seed gradient.
inline void check_second_order(const std::string& k, const std::string& tag, const std::vector<std::string>& names,
                               const std::function<Tensor(const Leaves&)>& f, bool scalar = false) {
    INFO(k << " variant " << tag);
    const std::string t = "_" + tag;
    std::vector<Tensor> xs;
    for (const std::string& n : names) xs.emplace_back(fixture(k, n + t), true);
    const Tensor out = f(xs);
    CHECK(max_rel_diff(out.value(), fixture(k, "out" + t)) <= 1e-12);
    const std::vector<Tensor> seed = scalar ? std::vector<Tensor>{} : std::vector<Tensor>{Tensor(fixture(k, "grad_out" + t))};
    const std::vector<Tensor> g = xg::grad({out}, xs, seed, {false, true, false});
    Tensor inner = xg::scalar(0.0);
    for (std::size_t i = 0; i < names.size(); ++i) {
        INFO("grad_" << names[i]);
        CHECK(max_rel_diff(g[i].value(), fixture(k, "grad_" + names[i] + t)) <= 1e-12);
        inner = inner + xg::sum(g[i] * Tensor(fixture(k, "u_" + names[i] + t)));
    }
    const std::vector<Tensor> h = xg::grad({inner}, xs, {}, {false, false, true});
    for (std::size_t i = 0; i < names.size(); ++i) {
        INFO("hvp_" << names[i]);
        const xg::Array want = fixture(k, "hvp_" + names[i] + t);
        // an input no second-order term reaches is undefined here, None in PyTorch (saved as zeros)
        const xg::Array got = h[i].defined() ? h[i].value() : xg::Array(xt::zeros<double>(want.shape()));
        CHECK(max_rel_diff(got, want) <= 1e-12);
    }
}

}  // namespace xg::test::golden
