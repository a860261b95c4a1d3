// Finite-difference checks of layer_norm over an image's (C, H, W).
#include <string>

#include <catch2/catch.hpp>

#include "nn/modules/image_norm.hpp"
#include "tests/support/gradcheck_support.hpp"

namespace xg_test_layer_norm_image_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using namespace xg;
using Inputs = std::vector<Tensor>;
using test::randn_leaf;
constexpr auto check = test::check_gradient;

TEST_CASE("gradcheck layer_norm over an image's (C, H, W)", "[gradcheck][norm]") {
    const Tensor x = randn_leaf({2, 2, 3, 2}, 38), w = randn_leaf({2, 3, 2}, 39, 0.5, 1.0), b = randn_leaf({2, 3, 2}, 40, 0.5);
    check([](const Inputs& t) { return F::layer_norm(t[0], {2, 3, 2}, t[1], t[2]); }, {x, w, b}, "layer_norm over (C, H, W)");
    check([](const Inputs& t) { return F::layer_norm_composed(t[0], {2, 3, 2}, t[1], t[2]); }, {x, w, b},
          "layer_norm_composed over (C, H, W)");
}

}  // namespace xg_test_layer_norm_image_gradcheck
