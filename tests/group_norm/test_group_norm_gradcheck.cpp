// Finite-difference checks of group_norm and instance_norm with their composed twins w.r.t. the
// input and every parameter, and of the modules in training and evaluation mode.
#include <string>

#include <catch2/catch.hpp>

#include "nn/modules/image_norm.hpp"
#include "tests/support/gradcheck_cases.hpp"

namespace xg_test_group_norm_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using namespace xg::test::gradcheck_cases;

TEST_CASE("gradcheck group_norm and group_norm_composed (groups 1, 2, C, 3-D and 4-D, no affine)", "[gradcheck][norm]") {
    for (std::int64_t groups : {1, 2, 4}) {
        for (const Shape& xs : {Shape{2, 4, 3, 2}, Shape{3, 4, 5}}) {
            const NormLeaves leaves = norm_leaves(xs, {4}, 25);
            check_fused_and_composed("group_norm", " groups " + std::to_string(groups) + " " + shape_str(xs),
                                     [=](const Inputs& t) { return F::group_norm(t[0], groups, t[1], t[2]); },
                                     [=](const Inputs& t) { return F::group_norm_composed(t[0], groups, t[1], t[2]); },
                                     {leaves.x, leaves.weight, leaves.bias});
        }
    }
    check_gradient([](const Inputs& t) { return F::group_norm(t[0], 2); }, {randn_leaf({2, 4, 3}, 28)}, "group_norm no affine");
    nn::GroupNorm gn(2, 4);
    check_affine_module("GroupNorm module", gn, norm_leaves({2, 4, 2, 3}, {4}, 29));
}

TEST_CASE("gradcheck instance_norm and instance_norm_composed (input stats, running stats), InstanceNorm2d",
          "[gradcheck][norm]") {
    const NormLeaves leaves = norm_leaves({2, 3, 3, 4}, {3}, 32);
    const Tensor rm = randn_leaf({3}, 35).detach(), rv = Tensor(xt::xarray<double>{0.7, 1.6, 1.1});
    for (bool input_stats : {true, false}) {
        check_fused_and_composed("instance_norm", input_stats ? " input stats" : " running stats",
                                 [=](const Inputs& t) { return F::instance_norm(t[0], rm, rv, t[1], t[2], input_stats); },
                                 [=](const Inputs& t) { return F::instance_norm_composed(t[0], rm, rv, t[1], t[2], input_stats); },
                                 {leaves.x, leaves.weight, leaves.bias});
    }
    check_gradient([](const Inputs& t) { return F::instance_norm(t[0]); }, {randn_leaf({2, 3, 5}, 36)}, "instance_norm no affine (N, C, L)");
    nn::InstanceNorm2d plain(3);
    check_gradient([&](const Inputs& t) { return plain.forward(t[0]); }, {randn_leaf({3, 4, 4}, 37)}, "InstanceNorm2d module unbatched");
    nn::InstanceNorm2d affine(3, 1e-5, 0.1, true, true);
    for (bool training : {true, false}) {
        affine.train(training);
        check_affine_module(std::string("InstanceNorm2d module affine, running stats") + (training ? " train" : " eval"), affine,
                            leaves);
    }
}

}  // namespace xg_test_group_norm_gradcheck
