// A Hessian-vector product against PyTorch's double backward (tests/fixtures, scripts/make_fixtures.py).
#include <functional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/ops/ops.hpp"
#include "nn/functional/functional.hpp"
#include "nn/functional/losses.hpp"
#include "tests/support/fixtures.hpp"

namespace xg_test_engine_higher_order_golden {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using xg::Tensor;
using xg::test::fixture;
using xg::test::fixture_index;
using xg::test::max_rel_diff;
namespace F = xg::nn::functional;

namespace {

using Inputs = std::vector<Tensor>;
using Fn = std::function<Tensor(const Inputs&)>;

// One variant of the double_backward_fused / mlp_hvp fixtures: the first-order gradients with
// create_graph, then the gradient of sum_i sum(grad_i * u_i), each against PyTorch's.
void check_second_order(const std::string& k, const std::string& tag, const std::vector<std::string>& names, const Fn& f,
                        bool scalar = false) {
    INFO(k << " variant " << tag);
    const std::string t = "_" + tag;
    Inputs xs;
    for (const std::string& n : names) xs.emplace_back(fixture(k, n + t), true);
    const Tensor out = f(xs);
    CHECK(max_rel_diff(out.value(), fixture(k, "out" + t)) <= 1e-12);
    const Inputs seed = scalar ? Inputs{} : Inputs{Tensor(fixture(k, "grad_out" + t))};
    const Inputs g = xg::grad({out}, xs, seed, {false, true, false});
    Tensor inner = xg::scalar(0.0);
    for (std::size_t i = 0; i < names.size(); ++i) {
        INFO("grad_" << names[i]);
        CHECK(max_rel_diff(g[i].value(), fixture(k, "grad_" + names[i] + t)) <= 1e-12);
        inner = inner + xg::sum(g[i] * Tensor(fixture(k, "u_" + names[i] + t)));
    }
    const Inputs h = xg::grad({inner}, xs, {}, {false, false, true});
    for (std::size_t i = 0; i < names.size(); ++i) {
        INFO("hvp_" << names[i]);
        const xg::Array want = fixture(k, "hvp_" + names[i] + t);
        // an input no second-order term reaches is undefined here, None in PyTorch (saved as zeros)
        const xg::Array got = h[i].defined() ? h[i].value() : xg::Array(xt::zeros<double>(want.shape()));
        CHECK(max_rel_diff(got, want) <= 1e-12);
    }
}

}  // namespace

TEST_CASE("Hessian-vector product of a small MLP's loss matches PyTorch", "[golden][higher-order]") {
    const std::string k = "mlp_hvp";
    const xg::IndexArray target = fixture_index(k, "target");
    check_second_order(k, "mlp", {"x", "w1", "b1", "w2", "b2"}, [&](const Inputs& a) {
        return F::cross_entropy(F::linear(xg::tanh(F::linear(a[0], a[1], a[2])), a[3], a[4]), target);
    }, true);
}

}  // namespace xg_test_engine_higher_order_golden
