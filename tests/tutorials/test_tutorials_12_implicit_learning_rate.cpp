// Tutorial 12 (the implicit learning rate of LayerNorm): A1.7. The numbers the tutorial prints, asserted
// (its guide-drift test is in test_tutorials.cpp). The expected values were printed by the tutorial's
// own functions (tutorial_values::a1_7_*) at full precision on 2026-12-06; values downstream of the
// Linear layers' matrix products are compared with a relative tolerance of 1e-9, since other
// machines' OpenBLAS kernels sum the products in another order and move the last digits.
#include <cmath>
#include <stdexcept>
#include <vector>

#include <catch2/catch.hpp>

#include "tutorials/12_implicit_learning_rate/implicit_learning_rate.hpp"

namespace xg_test_tutorials_12_implicit_learning_rate {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace tv = tutorial_values;

constexpr double kBlasRel = 1e-9;  // float64 values downstream of BLAS (see the top of the file)

TEST_CASE("A1.7: with LayerNorm (eps 0) rescaling W leaves the loss unchanged and divides the gradient by the scale",
          "[tutorials]") {
    const tv::ImplicitLrData d = tv::a1_7_data();
    const std::vector<double> scales{0.25, 1, 4, 16};
    const auto rows = tv::a1_7_rescaled(d, true, 0.0, scales);
    REQUIRE(rows.size() == 4);
    const tv::ImplicitLrRescaled& at1 = rows[1];
    // The tutorial's Step 2 table (LayerNorm, eps 0): loss 0.554119, |W| 3.2664, |grad W| 0.408389,
    // |grad W| * |W| 1.333949, at full precision.
    CHECK(at1.scale == 1.0);
    CHECK(at1.loss == Approx(0.55411858048149265).epsilon(kBlasRel));
    CHECK(at1.w_norm == Approx(3.2663684203389267).epsilon(kBlasRel));
    CHECK(at1.g_norm == Approx(0.40838910916443499).epsilon(kBlasRel));
    CHECK(at1.g_norm * at1.w_norm == Approx(1.3339492893850571).epsilon(kBlasRel));
    // The scales are powers of two: a * W0 is exact, and so is every product, sum, mean, variance,
    // square root and quotient after it (each is scaled by a power of two, whatever the summation
    // order of the BLAS kernel). With eps 0 LayerNorm's output is then the same to the bit, and
    // the invariance holds exactly: the same loss, |grad W| exactly divided by a, so
    // |grad W| * |W| and cos(grad W, W) identical in every row.
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const tv::ImplicitLrRescaled& r = rows[i];
        INFO("a = " << r.scale);
        CHECK(r.scale == scales[i]);
        CHECK(r.loss == at1.loss);
        CHECK(r.w_norm == r.scale * at1.w_norm);
        CHECK(r.g_norm * r.scale == at1.g_norm);
        CHECK(r.g_norm * r.w_norm == at1.g_norm * at1.w_norm);
        // The gradient is orthogonal to W (the tutorial prints "< 1e-12"): here -5.8e-18.
        CHECK(std::fabs(r.cosine) < 1e-12);
    }
}

TEST_CASE("A1.7: without normalisation the loss and |grad W| * |W| change with the scale of W", "[tutorials]") {
    const tv::ImplicitLrData d = tv::a1_7_data();
    const auto rows = tv::a1_7_rescaled(d, false, 0.0, {0.25, 1, 4, 16});
    REQUIRE(rows.size() == 4);
    // Step 2's second table: loss 0.443622 0.496490 0.637298 0.720769, |grad W| * |W| 0.276605
    // 0.929219 1.765169 2.209320, cos 0.0351 0.0862 0.0527 0.0140 (full precision).
    const std::vector<double> loss{0.44362175750049027, 0.49649032090008477, 0.63729811652555346, 0.72076871603591264};
    const std::vector<double> product{0.2766050522122781, 0.92921932483897829, 1.765168896818486, 2.209319751284156};
    const std::vector<double> cosine{0.035057897559211376, 0.086170100173164052, 0.052678493928829118, 0.014019869768194216};
    for (std::size_t i = 0; i < rows.size(); ++i) {
        INFO("a = " << rows[i].scale);
        CHECK(rows[i].loss == Approx(loss[i]).epsilon(kBlasRel));
        CHECK(rows[i].g_norm * rows[i].w_norm == Approx(product[i]).epsilon(kBlasRel));
        CHECK(rows[i].cosine == Approx(cosine[i]).epsilon(kBlasRel));
        if (i > 0) {  // the claim: neither is invariant; here both grow with a
            CHECK(rows[i].loss > rows[i - 1].loss);
            CHECK(rows[i].g_norm * rows[i].w_norm > rows[i - 1].g_norm * rows[i - 1].w_norm);
        }
    }
}

TEST_CASE("A1.7: with PyTorch's eps 1e-5 the invariance is approximate", "[tutorials]") {
    const tv::ImplicitLrData d = tv::a1_7_data();
    const auto rows = tv::a1_7_rescaled(d, true, 1e-5, {1, 4});
    REQUIRE(rows.size() == 2);
    // Step 4: "|grad W| * |W| at a = 1: 1.333937, at a = 4: 1.333949 (eps/var(W x) of the first is 3.0e-05)".
    CHECK(rows[0].g_norm * rows[0].w_norm == Approx(1.3339370781743503).epsilon(kBlasRel));
    CHECK(rows[1].g_norm * rows[1].w_norm == Approx(1.3339485261709114).epsilon(kBlasRel));
    CHECK(1e-5 / (rows[0].w_norm * rows[0].w_norm / static_cast<double>(tv::kImplicitLrHidden)) ==
          Approx(3.0e-5).margin(0.05e-5));
    // eps pulls the larger W towards the eps-0 value 1.3339492893850571 (Step 2): eps matters less
    // as var(W x) grows.
    const double exact = 1.3339492893850571;
    CHECK(std::fabs(rows[1].g_norm * rows[1].w_norm - exact) < std::fabs(rows[0].g_norm * rows[0].w_norm - exact));
}

TEST_CASE("A1.7: the first SGD steps, with and without LayerNorm", "[tutorials]") {
    // 10 steps of lr 1 on minibatches of 16: the tutorial's first row of Step 5 (1-10: LN |W| 3.601,
    // angle 7.636°, none |W| 3.355, angle 5.946°), at full precision.
    const tv::ImplicitLrTrajectory ln = tv::a1_7_sgd(true, 10), plain = tv::a1_7_sgd(false, 10);
    REQUIRE(ln.w_norm.size() == 11);
    REQUIRE(ln.angle.size() == 10);
    REQUIRE(ln.grad_norm.size() == 10);
    CHECK(ln.w_norm[0] == plain.w_norm[0]);  // the same initial W
    CHECK(ln.w_norm[0] == Approx(3.2663684203389267).epsilon(kBlasRel));
    CHECK(ln.w_norm[10] == Approx(3.6013539336938294).epsilon(kBlasRel));
    CHECK(tv::a1_7_window_mean(ln.angle, 0, 10) == Approx(7.6357086242516816).epsilon(kBlasRel));
    CHECK(ln.loss[0] == Approx(0.60998886180228939).epsilon(kBlasRel));
    CHECK(ln.grad_norm[0] == Approx(0.6486353554638481).epsilon(kBlasRel));
    CHECK(plain.w_norm[10] == Approx(3.3553107603791337).epsilon(kBlasRel));
    CHECK(tv::a1_7_window_mean(plain.angle, 0, 10) == Approx(5.9457738668493763).epsilon(kBlasRel));
    CHECK(plain.loss[0] == Approx(0.53796654401780986).epsilon(kBlasRel));
    // With LayerNorm every step is orthogonal to W (eps 1e-5 keeps |cos| off 0: 4.95e-6 here) and
    // |W| only grows; without it neither (largest |cos| 0.122 in these 10 steps).
    CHECK(ln.max_cosine < 1e-4);
    CHECK(ln.max_pythagoras_error < 1e-4);
    for (std::size_t s = 0; s < 10; ++s) CHECK(ln.w_norm[s + 1] > ln.w_norm[s]);
    CHECK(plain.max_cosine > 0.1);
}

// The quick run's whole SGD comparison (3000 steps, 0.5 s): the values the tutorial prints in
// Steps 5-7, to the digits it prints (those are the ones the guide shows; at full precision the
// 3000 steps carry the BLAS kernels' last-bit differences along), the effective learning rate
// relation step by step, and the verdict.
TEST_CASE("A1.7: under SGD |W| grows and the angle per step falls with lr/|W|^2 with LayerNorm, neither without",
          "[tutorials][experiments]") {
    const std::size_t steps = 3000;
    const tv::ImplicitLrTrajectory ln = tv::a1_7_sgd(true, steps), plain = tv::a1_7_sgd(false, steps);
    REQUIRE(ln.w_norm.size() == steps + 1);
    // Step 5's table: LN |W| 3.601 4.213 4.752 5.615 7.112 after 10, 100, 300, 1000, 3000 steps;
    // none 3.266 (start), 2.949 (end). Printed with 3 decimals: within half a unit of the last.
    const std::vector<std::size_t> at{10, 100, 300, 1000, 3000};
    const std::vector<double> ln_printed{3.601, 4.213, 4.752, 5.615, 7.112};
    for (std::size_t k = 0; k < at.size(); ++k) CHECK(ln.w_norm[at[k]] == Approx(ln_printed[k]).margin(5e-4));
    CHECK(ln.w_norm[0] == Approx(3.266).margin(5e-4));
    CHECK(plain.w_norm[steps] == Approx(2.949).margin(5e-4));
    CHECK(tv::kImplicitLrLr / (ln.w_norm[steps] * ln.w_norm[steps]) == Approx(0.0198).margin(5e-5));  // lr/|W|^2
    // Step 7: angle per step 1.94° -> 0.86° with LayerNorm, 2.83° -> 2.83° without.
    CHECK(tv::a1_7_window_mean(ln.angle, 100, 300) == Approx(1.94).margin(5e-3));
    CHECK(tv::a1_7_window_mean(ln.angle, 1000, steps) == Approx(0.86).margin(5e-3));
    CHECK(tv::a1_7_window_mean(plain.angle, 100, 300) == Approx(2.83).margin(5e-3));
    CHECK(tv::a1_7_window_mean(plain.angle, 1000, steps) == Approx(2.83).margin(5e-3));
    // Step 6: the gradient stays orthogonal to W, so |W_next|^2 = |W|^2 + lr^2 |grad W|^2; without
    // LayerNorm the largest |cos| is 0.216.
    CHECK(ln.max_cosine < 1e-4);
    CHECK(ln.max_pythagoras_error < 1e-4);
    CHECK(plain.max_cosine == Approx(0.216).margin(5e-4));
    // The effective learning rate: a step orthogonal to W turns it by exactly atan(lr |grad W| / |W|),
    // i.e. tan(angle) = lr/|W|^2 * (|grad W| * |W|). A component c = cos(grad W, W) along W changes
    // tan(angle) by a relative c * tan(angle) + c^2 at most, so each step is within
    // max_cosine * (1 + tan(angle)) of the relation (the largest deviation here: 9.9e-7).
    for (std::size_t s = 0; s < steps; ++s) {
        const double tan_angle = std::tan(ln.angle[s] * M_PI / 180);
        const double effective_lr = tv::kImplicitLrLr / (ln.w_norm[s] * ln.w_norm[s]);
        const double predicted = effective_lr * ln.grad_norm[s] * ln.w_norm[s];
        INFO("step " << s + 1);
        CHECK(std::fabs(tan_angle / predicted - 1) <= ln.max_cosine * (1 + tan_angle));
    }
    // The verdict of Step 7: "holds: with LayerNorm |W| keeps growing and the angular step falls with
    // lr/|W|^2; without it |W| does not grow and the angular step stays where it is".
    const tv::ImplicitLrVerdict v = tv::a1_7_verdict(ln, plain, steps);
    CHECK(v.ln_shows);
    CHECK(v.plain_neither);
    // The guide: lr/|W|^2 falls "x0.45" from step 300 to the end, and the angle per step in the same
    // ratio (0.4446 against 0.4464 in this run: within 0.4 %; the verdict's rule asks for 25 %).
    CHECK(v.ln_lr_ratio == Approx(0.45).margin(5e-3));
    CHECK(v.ln_angle_ratio / v.ln_lr_ratio == Approx(1.0).margin(0.01));
    CHECK_THROWS_AS(tv::a1_7_verdict(ln, plain, 1000), std::invalid_argument);
}

}  // namespace xg_test_tutorials_12_implicit_learning_rate
