// The image normalisations (GroupNorm, InstanceNorm, BatchNorm2d) reject bad shapes and arguments,
// naming the op and the shapes.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include <catch2/catch.hpp>
#include <xtensor/xview.hpp>

#include "core/engine/random.hpp"
#include "nn/nn.hpp"

namespace xg_test_group_norm_errors {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using namespace xg;
using Catch::Contains;

TEST_CASE("image normalisations reject bad shapes and arguments", "[norm][errors]") {
    const Tensor x = randn({2, 6, 3, 3});
    REQUIRE_THROWS_WITH(F::group_norm(x, 4), Contains("group_norm") && Contains("num_groups = 4") && Contains("(2, 6, 3, 3)"));
    REQUIRE_THROWS_WITH(F::group_norm(x, 2, randn({3})), Contains("weight must have shape (6,)"));
    REQUIRE_THROWS_WITH(F::instance_norm(randn({2, 3, 1, 1})), Contains("instance_norm") && Contains("more than 1 spatial element"));
    REQUIRE_THROWS_WITH(F::instance_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), false), Contains("running_mean"));
    REQUIRE_THROWS_WITH(F::batch_norm(randn({1, 3, 1, 1}), Tensor(), Tensor(), Tensor(), Tensor(), true),
                        Contains("Expected more than 1 value per channel when training"));
    REQUIRE_THROWS_WITH(nn::GroupNorm(4, 6), Contains("GroupNorm") && Contains("num_groups (4)"));
    REQUIRE_THROWS_WITH(nn::BatchNorm2d(6).forward(randn({2, 6, 3})), Contains("BatchNorm2d") && Contains("(2, 6, 3)"));
    REQUIRE_THROWS_WITH(nn::InstanceNorm2d(4, 1e-5, 0.1, true).forward(x), Contains("InstanceNorm2d") && Contains("(2, 6, 3, 3)"));
    nn::BatchNorm2d bn(6);
    CHECK_THROWS(bn.forward(randn({1, 6, 1, 1})));
    CHECK(bn.num_batches_tracked.item() == 0.0);  // a rejected batch leaves the state untouched
}

}  // namespace xg_test_group_norm_errors
