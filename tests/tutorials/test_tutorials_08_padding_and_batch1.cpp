// Tutorial 08 (padding and a batch of one): A4.5, A4.6. The numbers the tutorial prints,
// asserted (its guide-drift test is in test_tutorials.cpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tutorials/08_padding_and_batch1/padding_batch1.hpp"

namespace xg_test_tutorials_08_padding_and_batch1 {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace tv = tutorial_values;
using Catch::Matchers::Contains;

TEST_CASE("A4.5 A4.6: padding and a batch of one", "[tutorials]") {
    const tv::Padding p = tv::a4_5_padding();
    CHECK(p.ln_real_token_change == 0.0);
    CHECK(p.bn_real_token_change > 0.1);
    const tv::BatchOfOne b = tv::a4_6_batch_of_one();
    CHECK_THAT(b.bn_train_error, Contains("Expected more than 1 value per channel when training"));
    CHECK(b.ln_train_vs_eval == 0.0);
    CHECK(b.ln_alone_vs_in_batch == 0.0);
    CHECK(b.bn_alone_eval_vs_in_batch_train > 0.01);
    // The printed running statistics are the ones eval mode used: the output follows from them
    // and the printed input by (x - running_mean) / sqrt(running_var + eps).
    REQUIRE(b.input.size() == 4);
    for (std::size_t j = 0; j < 4; ++j) {
        CHECK(b.bn_eval_out(0, j) == Approx((b.input(0, j) - b.running_mean(j)) / std::sqrt(b.running_var(j) + 1e-5)).epsilon(1e-14));
    }
}

// ---- experiments, in a tiny configuration (they must run end to end) -----------------------------

}  // namespace xg_test_tutorials_08_padding_and_batch1
