// Tutorial 01 (LayerNorm by hand): A0.1, A2.1, A2.2, A3.1, A3.2. The numbers the tutorial prints,
// asserted (its guide-drift test is in test_tutorials.cpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tutorials/01_layernorm_by_hand/layernorm_by_hand.hpp"
#include "tests/tutorials/tutorial_checks.hpp"

namespace xg_test_tutorials_01_layernorm_by_hand {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace tv = tutorial_values;
using Catch::Matchers::Contains;
using xg::test::check_values;

TEST_CASE("A0.1 A2.1 A2.2: LayerNorm of (2, 4, 6, 8) by hand, by core ops, by nn::LayerNorm", "[tutorials]") {
    const tv::HandCalculation h = tv::a2_1_hand_calculation();
    CHECK(h.mean == 5.0);
    CHECK(h.variance == 5.0);
    CHECK(h.sigma == Approx(2.2360680).margin(1e-7));
    check_values(h.normalized, {-1.3416408, -0.4472136, 0.4472136, 1.3416408}, 1e-7);
    CHECK(std::fabs(h.sum_of_outputs) < 1e-12);

    const tv::FormulaSteps f = tv::a0_1_formula();
    CHECK(f.gamma_shape == xg::Shape{4});
    check_values(f.gamma, {1, 1, 1, 1}, 0);
    check_values(f.beta, {0, 0, 0, 0}, 0);

    const tv::Builtin b = tv::a2_2_builtin();
    check_values(b.out, {-1.3416394, -0.4472131, 0.4472131, 1.3416394}, 1e-7);  // the article's exact values
    CHECK(b.max_diff_vs_formula < 1e-15);
    CHECK(b.max_diff_vs_hand > 1e-6);  // eps = 1e-5 is visible in the 6th decimal
    CHECK(b.max_diff_vs_hand < 2e-6);
}

TEST_CASE("A3.1: single vector, rounding vs the article's truncation", "[tutorials]") {
    const tv::SingleVector s = tv::a3_1_single_vector();
    CHECK(s.mean == 2.5);
    CHECK(s.variance == Approx(1.25).epsilon(1e-15));
    CHECK(s.sigma == Approx(1.1180385).margin(1e-7));
    check_values(tv::round_to(s.plain, 5), {-1.34164, -0.44721, 0.44721, 1.34164}, 1e-12);
    check_values(tv::round_to(s.affine, 5), {-1.68327, 0.10558, 1.89442, 3.68327}, 1e-12);
    // The article's -1.6832 and 3.6832 are truncations; rounding gives -1.6833 and 3.6833.
    CHECK(s.affine_trunc4(0) == Approx(s.article_affine(0)).margin(1e-12));
    CHECK(s.affine_trunc4(3) == Approx(s.article_affine(3)).margin(1e-12));
    check_values(s.affine_round4, {-1.6833, 0.1056, 1.8944, 3.6833}, 1e-12);
}

TEST_CASE("A3.2: without eps a constant vector gives NaN, with eps beta and a finite gradient", "[tutorials]") {
    const tv::EpsPitfall p = tv::a3_2_eps_pitfall();
    for (double v : p.out_without_eps) CHECK(std::isnan(v));
    for (double v : p.grad_without_eps) CHECK(std::isnan(v));
    CHECK_THAT(p.anomaly_message, Contains("div"));
    check_values(p.out_with_eps, {0.5, -0.5, 0.25, 0.0}, 1e-15);
    const double k = 1.0 / std::sqrt(1e-5);
    check_values(p.grad_with_eps, {-1.5 * k, -0.5 * k, 0.5 * k, 1.5 * k}, 1e-9);
    check_values(p.near_constant_with_eps, {0, 0, 0}, 1e-12);
}

}  // namespace xg_test_tutorials_01_layernorm_by_hand
