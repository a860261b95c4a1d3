// What the golden-value tests of the fused ops share (tests/<area>/test_<area>_golden.cpp): a case
// that compares xgrad's arrays with PyTorch's fixtures (tests/fixtures/README.md) and prints its
// worst relative difference.
#pragma once

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/engine/tensor.hpp"
#include "core/ops/ops.hpp"
#include "tests/support/fixtures.hpp"

namespace xg::test::golden {

/// The relative tolerance of a float64 result against PyTorch's float64 one.
constexpr double kTol = 1e-12;

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

/// One variant `tag` of a second-order fixture `k` (double_backward_fused, mlp_hvp): f's output,
/// its first-order gradients with create_graph, then the gradient of sum_i sum(grad_i * u_i), each
/// against PyTorch's double backward. `scalar`: f returns a scalar and needs no seed gradient.
inline void check_second_order(const std::string& k, const std::string& tag, const std::vector<std::string>& names,
                               const std::function<Tensor(const std::vector<Tensor>&)>& f, bool scalar = false) {
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
