// layer_norm and layer_norm_composed against PyTorch golden values (tests/fixtures/README.md):
// outputs and gradients of sum(out * grad_out), 1-D and 2-D normalized_shape, rows of mean 1e6.
// LayerNorm over an image's (C, H, W) against PyTorch golden values (tests/fixtures/README.md).
#include <catch2/catch.hpp>

#include "nn/functional/functional.hpp"
#include "nn/modules/norm_layers.hpp"
#include "tests/support/golden.hpp"

namespace xg_test_layer_norm_golden {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using xg::Shape;
using namespace xg::test::golden;  // check_twins, Leaves, kTol, check_module

TEST_CASE("layer_norm matches PyTorch (1-D, 2-D normalized_shape, mean 1e6)", "[fused][golden]") {
    struct Case { const char* name; Shape normalized; double tol; };
    // README: ~1e-9 for the large-mean rows (x itself carries ~1e-10 absolute rounding at 1e6).
    for (const Case& k : {Case{"layernorm_1d", {8}, kTol}, Case{"layernorm_2d", {4, 8}, kTol},
                          Case{"layernorm_large_mean", {8}, 1e-9}}) {
        check_twins({k.name, {"x", "weight", "bias"}, [normalized = k.normalized](const Leaves& a, bool composed) {
                         return composed ? F::layer_norm_composed(a[0], normalized, a[1], a[2])
                                         : F::layer_norm(a[0], normalized, a[1], a[2]);
                     }, k.tol});
    }
}

TEST_CASE("LayerNorm over (C, H, W) matches PyTorch", "[norm][golden]") {
    xg::nn::LayerNorm ln(Shape{3, 4, 5});
    check_module("LayerNorm (C, H, W)", ln, "layernorm_chw");
}

}  // namespace xg_test_layer_norm_golden
