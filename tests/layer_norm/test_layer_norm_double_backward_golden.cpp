// layer_norm's second derivatives (fused and composed) against PyTorch's double backward
// (tests/fixtures, scripts/make_fixtures.py).
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/ops/ops.hpp"
#include "nn/functional/functional.hpp"
#include "tests/support/golden.hpp"

namespace xg_test_layer_norm_double_backward_golden {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using xg::Tensor;
using namespace xg::test::golden;  // fixture, max_rel_diff

TEST_CASE("layer_norm double backward matches PyTorch (fused and composed)", "[golden][higher-order]") {
    const std::string k = "layer_norm_double_backward";
    for (const bool fused : {true, false}) {
        INFO((fused ? "fused layer_norm" : "layer_norm_composed"));
        Tensor x(fixture(k, "x"), true), w(fixture(k, "weight"), true), b(fixture(k, "bias"), true);
        const Tensor out = fused ? F::layer_norm(x, {6}, w, b, 1e-5) : F::layer_norm_composed(x, {6}, w, b, 1e-5);
        const std::vector<Tensor> g = xg::grad({out}, {x, w, b}, {Tensor(fixture(k, "grad_out"))}, {false, true, false});
        CHECK(max_rel_diff(g[0].value(), fixture(k, "grad_x")) <= 1e-12);
        CHECK(max_rel_diff(g[1].value(), fixture(k, "grad_weight")) <= 1e-12);
        const Tensor inner = xg::sum(g[0] * Tensor(fixture(k, "u_x"))) + xg::sum(g[1] * Tensor(fixture(k, "u_w"))) +
                             xg::sum(g[2] * Tensor(fixture(k, "u_b")));
        const std::vector<Tensor> h = xg::grad({inner}, {x, w, b}, {}, {false, false, true});
        CHECK(max_rel_diff(h[0].value(), fixture(k, "hvp_x")) <= 1e-12);
        CHECK(max_rel_diff(h[1].value(), fixture(k, "hvp_weight")) <= 1e-12);
        // out is affine in the bias: no second-order term reaches it (PyTorch returns None)
        CHECK_FALSE(h[2].defined());
    }
}

}  // namespace xg_test_layer_norm_double_backward_golden
