// Convolution and pooling: bad shapes and arguments named, max_pool2d's ties and NaNs as PyTorch,
// unbatched input as PyTorch.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include <catch2/catch.hpp>
#include <xtensor/xview.hpp>

#include "core/engine/random.hpp"
#include "nn/nn.hpp"

namespace xg_test_conv {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using namespace xg;
using Catch::Contains;

TEST_CASE("conv and pooling reject bad shapes and arguments, naming the op and the shapes", "[conv][errors]") {
    const Tensor x = randn({2, 3, 5, 5}), w = randn({4, 3, 3, 3});
    REQUIRE_THROWS_WITH(F::conv2d(randn({3, 5, 5}), w), Contains("conv2d") && Contains("(3, 5, 5)") && Contains("(N, C, H, W)"));
    REQUIRE_THROWS_WITH(F::conv2d(x, randn({4, 2, 3, 3})), Contains("conv2d") && Contains("3 channels") && Contains("(4, 2, 3, 3)"));
    REQUIRE_THROWS_WITH(F::conv2d(x, randn({4, 1, 3, 3}), Tensor(), 1, 0, 1, 3), Contains("out_channels 4") && Contains("groups = 3"));
    REQUIRE_THROWS_WITH(F::conv2d(x, w, randn({3})), Contains("bias must have shape (4,)") && Contains("(3,)"));
    REQUIRE_THROWS_WITH(F::conv2d(x, w, Tensor(), 0), Contains("conv2d") && Contains("stride must be positive") && Contains("(0, 0)"));
    REQUIRE_THROWS_WITH(F::conv2d(x, w, Tensor(), 1, -1), Contains("padding must be non-negative"));
    REQUIRE_THROWS_WITH(F::conv2d(x, randn({4, 3, 7, 3})), Contains("does not fit") && Contains("(2, 3, 5, 5)"));
    REQUIRE_THROWS_WITH(F::conv1d(x, w), Contains("conv1d") && Contains("(N, C, L)"));
    REQUIRE_THROWS_WITH(F::max_pool2d(x, 2, std::nullopt, 2), Contains("max_pool2d") && Contains("at most half"));
    REQUIRE_THROWS_WITH(F::avg_pool2d(x, 7), Contains("avg_pool2d") && Contains("does not fit"));
    REQUIRE_THROWS_WITH(F::adaptive_avg_pool2d(x, 0), Contains("adaptive_avg_pool2d") && Contains("positive"));
    REQUIRE_THROWS_WITH(F::pad(x, {1, 1, 1}), Contains("pad") && Contains("3 values"));
    REQUIRE_THROWS_WITH(nn::Conv2d(3, 4, 3, 1, 0, 1, 2), Contains("Conv2d") && Contains("groups (2)"));
    nn::Conv2d conv(3, 4, 3);
    REQUIRE_THROWS_WITH(conv.forward(randn({2, 4, 5, 5})), Contains("Conv2d") && Contains("(N, 3, H, W)") && Contains("(2, 4, 5, 5)"));
    REQUIRE_THROWS_WITH(conv.forward(randn({4, 5, 5})), Contains("Conv2d") && Contains("(3, H, W)") && Contains("(4, 5, 5)"));
    REQUIRE_THROWS_WITH(nn::Flatten(2, 1).forward(x), Contains("Flatten") && Contains("(2, 3, 5, 5)"));
}

TEST_CASE("max_pool2d: first maximum wins a tie, a NaN wins its window, as PyTorch", "[conv]") {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    // PyTorch 1.13: max_pool2d(x, 2, 1, return_indices=True) on these planes (checked by hand there).
    const Tensor ties({{{{1.0, 3.0, 3.0}, {3.0, 2.0, 1.0}, {0.0, 3.0, 3.0}}}});
    const IndexArray ties_at{{{{1, 1}, {3, 7}}}}, nans_at{{{{3, 1}, {3, 7}}}};
    auto r = F::max_pool2d_with_indices(ties, 2, 1);
    CHECK(static_cast<bool>(r.indices == ties_at));
    const Tensor nans({{{{1.0, nan, 3.0}, {nan, 2.0, 1.0}, {0.0, 3.0, 3.0}}}});
    r = F::max_pool2d_with_indices(nans, 2, 1);
    CHECK(static_cast<bool>(r.indices == nans_at));
    CHECK(std::isnan(r.output(0, 0, 0, 0)));
    CHECK(r.output(0, 0, 1, 1) == 3.0);
}

TEST_CASE("convolution and pooling modules take unbatched input like PyTorch", "[conv]") {
    manual_seed(7);
    const Tensor image = randn({3, 6, 5}), batch = unsqueeze(image, 0);
    nn::Conv2d conv(3, 2, 3, 1, 1);
    nn::Conv1d conv1(3, 2, 3);
    nn::MaxPool2d max_pool(2);
    nn::AvgPool2d avg_pool(3, 2, 1);
    nn::AdaptiveAvgPool2d global(1);
    const auto same = [](const Tensor& unbatched, const Tensor& batched) {
        const Shape b = batched.shape();
        return unbatched.shape() == Shape(b.begin() + 1, b.end()) &&
               std::equal(unbatched.value().begin(), unbatched.value().end(), batched.value().begin());
    };
    CHECK(same(conv.forward(image), conv.forward(batch)));
    const Tensor signal = randn({3, 7});
    CHECK(same(conv1.forward(signal), conv1.forward(unsqueeze(signal, 0))));
    CHECK(same(max_pool.forward(image), max_pool.forward(batch)));
    CHECK(same(avg_pool.forward(image), avg_pool.forward(batch)));
    CHECK(same(global.forward(image), global.forward(batch)));
    const auto r = max_pool.forward_with_indices(image);
    CHECK(r.indices.dimension() == 3);
}

}  // namespace xg_test_conv
