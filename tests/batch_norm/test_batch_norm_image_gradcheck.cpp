// Finite-difference checks of batch_norm on (N, C, H, W), train and eval, and of BatchNorm2d.
#include <string>

#include <catch2/catch.hpp>

#include "nn/modules/image_norm.hpp"
#include "tests/support/gradcheck_cases.hpp"

namespace xg_test_batch_norm_image_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using namespace xg::test::gradcheck_cases;

TEST_CASE("gradcheck batch_norm2d: batch_norm on (N, C, H, W), train and eval, and BatchNorm2d", "[gradcheck][norm]") {
    const NormLeaves leaves = norm_leaves({3, 2, 3, 2}, {2}, 21);
    const Inputs xwb{leaves.x, leaves.weight, leaves.bias};
    const Tensor rm = randn_leaf({2}, 24).detach(), rv = Tensor(xt::xarray<double>{0.7, 1.6});
    for (bool training : {true, false}) {
        const std::string mode = training ? " train" : " eval";
        check_gradient([=](const Inputs& t) { return F::batch_norm(t[0], rm, rv, t[1], t[2], training); }, xwb, "batch_norm2d" + mode);
        check_gradient([=](const Inputs& t) { return F::batch_norm_composed(t[0], rm, rv, t[1], t[2], training); }, xwb,
                       "batch_norm2d composed" + mode);
    }
    nn::BatchNorm2d bn(2);
    for (bool training : {true, false}) {
        bn.train(training);
        check_affine_module(std::string("BatchNorm2d module") + (training ? " train" : " eval"), bn, leaves);
    }
}

}  // namespace xg_test_batch_norm_image_gradcheck
