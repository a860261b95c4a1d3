// The seed statistics every experiment tutorial prints (tutorials/common/seed_stats.hpp). The numbers the tutorial prints,
// asserted (its guide-drift test is in test_tutorials.cpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tutorials/common/seed_stats.hpp"

namespace xg_test_tutorials_seed_stats {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace tv = tutorial_values;

TEST_CASE("The seed statistics: mean, sample std and the paired t-test", "[tutorials]") {
    CHECK(tv::seed_mean({1.0, 2.0, 3.0}) == Approx(2.0));
    CHECK(tv::seed_std({1.0, 2.0, 3.0}) == Approx(1.0));
    CHECK(tv::mean_pm_std({1.0, 2.0, 3.0}, 2) == "2.00 ± 1.00");
    // differences 1.0, 1.2, 0.8: mean 1, std 0.2, t = 1 / (0.2 / sqrt 3) = 8.66 > 4.303
    const tv::PairedDifference d = tv::paired_difference({1.0, 1.0, 1.0}, {2.0, 2.2, 1.8});
    CHECK(d.mean == Approx(1.0));
    CHECK(d.std == Approx(0.2));
    CHECK(d.t == Approx(8.660254));
    CHECK(d.t_needed == Approx(4.303));
    CHECK(d.significant);
    const tv::PairedDifference noise = tv::paired_difference({1.0, 1.0, 1.0}, {1.5, 0.7, 1.1});
    CHECK_FALSE(noise.significant);
    CHECK_THROWS_AS(tv::paired_difference({1.0}, {2.0}), xg::Error);
}

}  // namespace xg_test_tutorials_seed_stats
