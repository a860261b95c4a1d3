// Finite-difference checks of group_norm and instance_norm with their composed twins w.r.t. the
// input and every parameter, and of the modules in training and evaluation mode.
#include <string>

#include <catch2/catch.hpp>

#include "nn/modules/image_norm.hpp"
#include "tests/support/gradcheck_support.hpp"

namespace xg_test_group_norm_gradcheck {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;

using namespace xg;

using Inputs = std::vector<Tensor>;

using test::randn_leaf;

constexpr auto check = test::check_gradient;

TEST_CASE("gradcheck group_norm and group_norm_composed (groups 1, 2, C, 3-D and 4-D, no affine)", "[gradcheck][norm]") {
    for (std::int64_t groups : {1, 2, 4}) {
        for (const Shape& xs : {Shape{2, 4, 3, 2}, Shape{3, 4, 5}}) {
            const Tensor x = randn_leaf(xs, 25), w = randn_leaf({4}, 26, 0.5, 1.0), b = randn_leaf({4}, 27, 0.5);
            const std::string name = "groups " + std::to_string(groups) + " " + shape_str(xs);
            check([=](const Inputs& t) { return F::group_norm(t[0], groups, t[1], t[2]); }, {x, w, b}, "group_norm " + name);
            check([=](const Inputs& t) { return F::group_norm_composed(t[0], groups, t[1], t[2]); }, {x, w, b},
                  "group_norm_composed " + name);
        }
    }
    check([](const Inputs& t) { return F::group_norm(t[0], 2); }, {randn_leaf({2, 4, 3}, 28)}, "group_norm no affine");
    nn::GroupNorm gn(2, 4);
    check([&](const Inputs& t) {
        gn.replace_parameter("weight", t[1]);
        gn.replace_parameter("bias", t[2]);
        return gn.forward(t[0]);
    }, {randn_leaf({2, 4, 2, 3}, 29), randn_leaf({4}, 30, 0.5, 1.0), randn_leaf({4}, 31, 0.5)}, "GroupNorm module");
}

TEST_CASE("gradcheck instance_norm and instance_norm_composed (input stats, running stats), InstanceNorm2d",
          "[gradcheck][norm]") {
    const Tensor x = randn_leaf({2, 3, 3, 4}, 32), w = randn_leaf({3}, 33, 0.5, 1.0), b = randn_leaf({3}, 34, 0.5);
    const Tensor rm = randn_leaf({3}, 35).detach(), rv = Tensor(xt::xarray<double>{0.7, 1.6, 1.1});
    for (bool input_stats : {true, false}) {
        const std::string mode = input_stats ? " input stats" : " running stats";
        check([=](const Inputs& t) { return F::instance_norm(t[0], rm, rv, t[1], t[2], input_stats); }, {x, w, b},
              "instance_norm" + mode);
        check([=](const Inputs& t) { return F::instance_norm_composed(t[0], rm, rv, t[1], t[2], input_stats); }, {x, w, b},
              "instance_norm_composed" + mode);
    }
    check([](const Inputs& t) { return F::instance_norm(t[0]); }, {randn_leaf({2, 3, 5}, 36)}, "instance_norm no affine (N, C, L)");
    nn::InstanceNorm2d plain(3);
    check([&](const Inputs& t) { return plain.forward(t[0]); }, {randn_leaf({3, 4, 4}, 37)}, "InstanceNorm2d module unbatched");
    nn::InstanceNorm2d affine(3, 1e-5, 0.1, true, true);
    for (bool training : {true, false}) {
        affine.train(training);
        check([&](const Inputs& t) {
            affine.replace_parameter("weight", t[1]);
            affine.replace_parameter("bias", t[2]);
            return affine.forward(t[0]);
        }, {x, w, b}, std::string("InstanceNorm2d module affine, running stats") + (training ? " train" : " eval"));
    }
}

}  // namespace xg_test_group_norm_gradcheck
