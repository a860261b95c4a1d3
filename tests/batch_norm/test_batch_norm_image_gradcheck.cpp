// Finite-difference checks of batch_norm on (N, C, H, W), train and eval, and of BatchNorm2d.
#include <string>

#include <catch2/catch.hpp>

#include "nn/modules/image_norm.hpp"
#include "tests/support/gradcheck_support.hpp"

namespace xg_test_batch_norm_image_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using namespace xg;
using Inputs = std::vector<Tensor>;
using test::randn_leaf;
constexpr auto check = test::check_gradient;

TEST_CASE("gradcheck batch_norm2d: batch_norm on (N, C, H, W), train and eval, and BatchNorm2d", "[gradcheck][norm]") {
    const Tensor x = randn_leaf({3, 2, 3, 2}, 21), w = randn_leaf({2}, 22, 0.5, 1.0), b = randn_leaf({2}, 23, 0.5);
    const Tensor rm = randn_leaf({2}, 24).detach(), rv = Tensor(xt::xarray<double>{0.7, 1.6});
    for (bool training : {true, false}) {
        const std::string mode = training ? " train" : " eval";
        check([=](const Inputs& t) { return F::batch_norm(t[0], rm, rv, t[1], t[2], training); }, {x, w, b}, "batch_norm2d" + mode);
        check([=](const Inputs& t) { return F::batch_norm_composed(t[0], rm, rv, t[1], t[2], training); }, {x, w, b},
              "batch_norm2d composed" + mode);
    }
    nn::BatchNorm2d bn(2);
    for (bool training : {true, false}) {
        bn.train(training);
        check([&](const Inputs& t) {
            bn.replace_parameter("weight", t[1]);
            bn.replace_parameter("bias", t[2]);
            return bn.forward(t[0]);
        }, {x, w, b}, std::string("BatchNorm2d module") + (training ? " train" : " eval"));
    }
}

}  // namespace xg_test_batch_norm_image_gradcheck
