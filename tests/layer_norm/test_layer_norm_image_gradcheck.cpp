// Finite-difference checks of layer_norm over an image's (C, H, W).
#include <catch2/catch.hpp>

#include "nn/modules/image_norm.hpp"
#include "tests/support/gradcheck_cases.hpp"

namespace xg_test_layer_norm_image_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg::test::gradcheck_cases;

TEST_CASE("gradcheck layer_norm over an image's (C, H, W)", "[gradcheck][norm]") {
    const NormLeaves leaves = norm_leaves({2, 2, 3, 2}, {2, 3, 2}, 38);
    check_fused_and_composed("layer_norm", " over (C, H, W)", [](const Inputs& t) { return F::layer_norm(t[0], {2, 3, 2}, t[1], t[2]); },
                             [](const Inputs& t) { return F::layer_norm_composed(t[0], {2, 3, 2}, t[1], t[2]); },
                             {leaves.x, leaves.weight, leaves.bias});
}

}  // namespace xg_test_layer_norm_image_gradcheck
