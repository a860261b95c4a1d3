// Tutorial 02 (BatchNorm vs LayerNorm axes): A0.2, A1.1, A3.3, A4.1, A4.2. The numbers the tutorial prints,
// asserted (its guide-drift test is in test_tutorials.cpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tutorials/02_bn_vs_ln_axes/bn_vs_ln_axes.hpp"
#include "tests/tutorials/tutorial_checks.hpp"

namespace xg_test_tutorials_02_bn_vs_ln_axes {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace tv = tutorial_values;
using xg::test::check_values;

TEST_CASE("A0.2 A1.1 A3.3: BatchNorm statistics per feature, LayerNorm per sample", "[tutorials]") {
    const tv::AxisStats s = tv::a1_1_scores();
    check_values(s.bn_mean, {75, 65, 55}, 1e-12);
    check_values(s.ln_mean, {80, 50}, 1e-12);
    check_values(s.bn_out, {1, 1, 1, -1, -1, -1}, 1e-6);
    check_values(s.ln_out, {1.2247449, 0, -1.2247449, 1.2247449, 0, -1.2247449}, 1e-6);

    const tv::AxesComparison c = tv::a0_2_axes();
    CHECK(c.ln_change_from_other_sample == 0.0);
    CHECK(c.bn_change_from_other_sample > 0.1);
    CHECK(c.ln_train_vs_eval == 0.0);
    CHECK(c.bn_train_vs_eval > 0.1);

    const tv::AxisPitfall p = tv::a3_3_axis_pitfall();
    CHECK(p.axis0_vs_batchnorm < 1e-12);
    CHECK(p.last_vs_layernorm < 1e-12);
    CHECK(p.axis0_vs_layernorm > 0.1);
}

TEST_CASE("A4.1 A4.2: (batch, seq, hidden) layout and the comparison table", "[tutorials]") {
    const tv::LayoutCheck l = tv::a4_1_layout();
    for (double m : l.max_token_mean) CHECK(m < 1e-12);
    for (double v : l.max_token_var_err) CHECK(v < 1e-4);
    CHECK(l.same_token_other_batch == 0.0);
    const tv::ComparisonTable t = tv::a4_2_table();
    CHECK(t.ln_saved_stats == 2 * 4 * 16);  // mean and rstd per token
    CHECK(t.bn_saved_stats == 2 * 32);      // per feature
}

}  // namespace xg_test_tutorials_02_bn_vs_ln_axes
