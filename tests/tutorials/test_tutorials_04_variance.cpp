// Tutorial 04 (computing the variance): two-pass, Welford, E[x^2] - E[x]^2. The numbers the tutorial prints,
// asserted (its guide-drift test is in test_tutorials.cpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tutorials/04_variance/variance.hpp"

namespace xg_test_tutorials_04_variance {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace tv = tutorial_values;

TEST_CASE("Tutorial 04: two-pass and Welford keep the variance at large means, E[x^2]-E[x]^2 does not", "[tutorials]") {
    for (const tv::OffsetRow& r : tv::offset_rows()) {
        INFO("offset " << r.offset);
        CHECK(r.two_pass == Approx(5.0).epsilon(1e-9));
        CHECK(r.welford == Approx(5.0).epsilon(1e-9));
        CHECK(r.library_var == Approx(5.0).epsilon(1e-9));
        CHECK(r.ln_first_library == Approx(-1.3416394).margin(1e-6));
        if (r.offset >= 1e8) CHECK(std::fabs(r.one_pass - 5.0) > 0.5);
    }
    const auto wide = tv::wide_rows();
    CHECK(wide.back().err_one_pass > 1.0);
    CHECK(wide.back().err_library_var < 1e-12);
    CHECK(wide.back().ln_max_abs_err < 1e-7);
}

}  // namespace xg_test_tutorials_04_variance
