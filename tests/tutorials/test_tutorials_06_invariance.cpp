// Tutorial 06 (invariances): A1.2. The numbers the tutorial prints,
// asserted (its guide-drift test is in test_tutorials.cpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tutorials/06_invariance/invariance.hpp"

namespace xg_test_tutorials_06_invariance {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace tv = tutorial_values;

TEST_CASE("A1.2: the invariance table matches the paper's Table 1", "[tutorials]") {
    const auto rows = tv::a1_2_invariance_table();
    REQUIRE(rows.size() == 7);
    for (const tv::InvarianceRow& r : rows) {
        INFO(r.transformation);
        if (!r.in_paper) continue;
        CHECK((r.bn_change < tv::kInvariantTol) == r.paper_bn);
        CHECK((r.wn_change < tv::kInvariantTol) == r.paper_wn);
        CHECK((r.ln_change < tv::kInvariantTol) == r.paper_ln);
    }
    CHECK(rows.back().ln_change > 0.01);  // shifting one sample is NOT an invariance of LN on W x
}

}  // namespace xg_test_tutorials_06_invariance
