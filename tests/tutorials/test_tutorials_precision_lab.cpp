// Tutorial 19 (the precision lab): its emulated number formats round as IEEE formats do, and the
// results its guide prints hold: the collapse points against the prediction, the reproduced
// PyTorch issues 40302, 51102 and 41527, RMSNorm's cast order and dgamma's accumulators.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#include <catch2/catch.hpp>

#include "tutorials/19_precision_lab/precision_lab.hpp"

namespace xg_test_tutorials_precision_lab {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace lab = tutorial_values::precision_lab;

namespace {

float from_bits(std::uint32_t bits) {
    float f = 0;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

std::uint32_t bits_of(float f) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &f, sizeof bits);
    return bits;
}

const float inf = std::numeric_limits<float>::infinity();

}  // namespace

TEST_CASE("bfloat16 rounding: nearest, ties to even, overflow to inf, NaN stays NaN", "[tutorials][precision]") {
    CHECK(lab::round_to_bfloat16(1.0f) == 1.0f);
    CHECK(lab::round_to_bfloat16(1.0f + 0x1p-8f) == 1.0f);                       // tie, 1 is even: down
    CHECK(lab::round_to_bfloat16(1.0f + 3 * 0x1p-8f) == 1.0f + 0x1p-6f);         // tie, 1 + 2^-7 is odd: up
    CHECK(lab::round_to_bfloat16(1.0f + 0x1p-8f + 0x1p-23f) == 1.0f + 0x1p-7f);  // past the tie: up
    CHECK(lab::round_to_bfloat16(-(1.0f + 0x1p-8f)) == -1.0f);
    CHECK(lab::round_to_bfloat16(from_bits(0x7f7f7fffu)) == from_bits(0x7f7f0000u));  // below the tie: the largest bfloat16
    CHECK(lab::round_to_bfloat16(std::numeric_limits<float>::max()) == inf);           // past it: infinity
    CHECK(lab::round_to_bfloat16(inf) == inf);
    CHECK(lab::round_to_bfloat16(-inf) == -inf);
    CHECK(lab::round_to_bfloat16(from_bits(1u)) == 0.0f);  // the smallest float subnormal rounds to 0
    CHECK(std::isnan(lab::round_to_bfloat16(std::numeric_limits<float>::quiet_NaN())));
    CHECK(std::isnan(lab::round_to_bfloat16(from_bits(0x7f800001u))));  // a NaN the rounding addition would make inf
    CHECK(std::isnan(lab::round_to_bfloat16(from_bits(0xffffffffu))));
    CHECK((bits_of(lab::round_to_bfloat16(1.3f)) & 0xffffu) == 0);
}

TEST_CASE("float16 rounding: nearest, ties to even, subnormals, overflow to inf, NaN stays NaN", "[tutorials][precision]") {
    CHECK(lab::round_to_float16(1.0f + 0x1p-11f) == 1.0f);                    // tie: down to even
    CHECK(lab::round_to_float16(1.0f + 3 * 0x1p-11f) == 1.0f + 0x1p-9f);      // tie: up to even
    CHECK(lab::round_to_float16(65504.0f) == 65504.0f);                       // the largest float16
    CHECK(lab::round_to_float16(65519.0f) == 65504.0f);
    CHECK(lab::round_to_float16(65520.0f) == inf);                            // the tie above it rounds to 2^16: inf
    CHECK(lab::round_to_float16(-70000.0f) == -inf);
    CHECK(lab::round_to_float16(0x1p-24f) == 0x1p-24f);                       // the smallest subnormal
    CHECK(lab::round_to_float16(0x1p-25f) == 0.0f);                           // half of it: tie, 0 is even
    CHECK(lab::round_to_float16(3 * 0x1p-26f) == 0x1p-24f);
    CHECK(lab::round_to_float16(1e-12f) == 0.0f);                             // BERT's eps (issue 41527)
    CHECK(lab::round_to_float16(1e-5f) == Approx(1e-5).epsilon(0.01));        // a subnormal, 1e-5 to 1 %
    CHECK(std::isnan(lab::round_to_float16(std::numeric_limits<float>::quiet_NaN())));
    CHECK(lab::round_to_float16(inf) == inf);
}

TEST_CASE("the bit-pattern roundings agree with the generic round_to_format on random floats", "[tutorials][precision]") {
    std::mt19937 gen(19);
    for (int i = 0; i < 200000; ++i) {
        const float f = from_bits(static_cast<std::uint32_t>(gen()));
        if (!std::isfinite(f)) continue;
        INFO("bits " << bits_of(f));
        REQUIRE(lab::round_to_bfloat16(f) == static_cast<float>(lab::round_to_format(f, 8, -126, 127)));
        REQUIRE(lab::round_to_float16(f) == static_cast<float>(lab::round_to_format(f, 11, -14, 15)));
    }
}

TEST_CASE("emulated arithmetic rounds every result: a float16 or bfloat16 running sum stalls", "[tutorials][precision]") {
    using lab::BFloat16;
    using lab::Float16;
    using lab::store;
    CHECK(lab::as_double(store<Float16>(2048) + store<Float16>(1)) == 2048);  // 2049 is a tie: to even, 2048
    CHECK(lab::as_double(store<Float16>(2048) + store<Float16>(3)) == 2052);
    CHECK(lab::as_double(store<BFloat16>(256) + store<BFloat16>(1)) == 256);
    CHECK(lab::as_double(store<Float16>(300) * store<Float16>(300)) == std::numeric_limits<double>::infinity());
    CHECK(lab::as_double(sqrt(store<Float16>(2))) == lab::round_to_format(std::sqrt(2.0), 11, -14, 15));
    CHECK(lab::as_double(store<Float16>(1e-12)) == 0);
}

TEST_CASE("precision lab: one-pass collapses near kappa^2 u = 1, and the stable algorithms do not", "[tutorials][precision]") {
    lab::CollapseConfig cfg;
    cfg.lengths = {64};
    const lab::CollapseStudy s = lab::collapse_study(cfg);
    auto row = [&](const std::string& storage, const std::string& acc, const std::string& algorithm) {
        for (const auto& r : s.rows)
            if (r.storage == storage && r.accumulator == acc && r.algorithm == algorithm) return r;
        FAIL("no row " << storage << " " << acc << " " << algorithm);
        return s.rows.front();
    };
    for (const auto& [format, u] : std::vector<std::pair<std::string, double>>{{"float32", 0x1p-24}, {"float16", 0x1p-11},
                                                                               {"bfloat16", 0x1p-8}}) {
        INFO(format);
        const double measured = row(format, format, "one-pass").collapse[0], predicted = lab::predicted_one_pass_collapse(u);
        CHECK(measured > predicted / 10);  // within a factor 10 of the prediction (1.24-1.37 and 0.63 measured)
        CHECK(measured < predicted * 10);
    }
    CHECK(lab::predicted_one_pass_collapse(0x1p-24) == Approx(4096).epsilon(1e-4));
    CHECK(lab::predicted_one_pass_collapse(0x1p-11) == Approx(45.25).epsilon(1e-3));
    CHECK(lab::predicted_one_pass_collapse(0x1p-8) == Approx(15.97).epsilon(1e-3));
    for (const char* algorithm : {"two-pass", "Welford", "shifted", "pairwise"}) {
        INFO(algorithm);
        CHECK(row("float32", "float32", algorithm).collapse[0] == 0);  // no collapse up to mu/sigma = 1e7
        CHECK(row("float16", "float32", algorithm).collapse[0] == 0);
        CHECK(row("bfloat16", "float64", algorithm).collapse[0] == 0);
    }
    CHECK(row("float64", "float64", "one-pass").collapse[0] == 0);  // needs mu/sigma ~ 1e8
}

TEST_CASE("precision lab reproduces PyTorch issues 40302 and 51102 in float32 and fixes them with two-pass",
          "[tutorials][precision]") {
    const lab::Issue40302 a = lab::issue_40302(4);
    REQUIRE(a.algorithms.size() == 6);
    CHECK(a.algorithms[0].algorithm == "one-pass");
    CHECK(a.algorithms[0].accumulator == "float32");
    CHECK(a.algorithms[0].zero_rows >= 1);  // the issue: every variance exactly 0
    for (std::size_t k = 1; k < a.algorithms.size(); ++k) {
        INFO(a.algorithms[k].algorithm << " " << a.algorithms[k].accumulator);
        CHECK(a.algorithms[k].zero_rows == 0);
        CHECK(a.algorithms[k].max_rel_err < 2e-3);
    }
    const std::vector<lab::Issue51102Row> b = lab::issue_51102(1000);
    double worst = 0;
    for (const auto& r : b) {
        worst = std::max(worst, r.out_var_one_pass);
        const double expected = r.true_var / (r.true_var + 1e-5);
        CHECK(std::fabs(r.out_var_two_pass - expected) < 1e-5);
        CHECK(std::fabs(r.out_var_xgrad - expected) < 1e-12);
    }
    CHECK(worst > 1000);  // the issue: up to 48426
    const lab::Float64Collapse c = lab::float64_collapse(1e9, 8);
    CHECK(std::fabs(c.worst_one_pass - 1) > 1);
    CHECK(std::fabs(c.worst_reference - 1) < 1e-4);
    CHECK(std::fabs(c.worst_fast - 1) < 1e-4);
}

TEST_CASE("precision lab: eps 1e-12 gives NaN in float16 on a zero row (issue 41527), 1e-5 inside does not",
          "[tutorials][precision]") {
    const std::vector<lab::EpsRow> rows = lab::eps_study();
    REQUIRE(rows.front().sigma == 0);
    REQUIRE(rows.front().cells.size() == 6);  // eps 1e-12, 1e-5, 1e-3 x inside, outside
    CHECK(rows.front().cells[0].nonfinite == 768);
    CHECK(rows.front().cells[3].nonfinite == 768);  // 1e-5 outside: 1 / 1e-5 overflows float16
    for (const auto& r : rows) {
        INFO("sigma " << r.sigma);
        CHECK(r.cells[2].nonfinite == 0);  // 1e-5 inside
        CHECK(r.cells[4].nonfinite == 0);  // 1e-3 inside
        CHECK(r.nonfinite_f32_stats == 0);
        if (r.sigma >= 1e-3) CHECK(r.cells[0].nonfinite == 0);
    }
}

TEST_CASE("precision lab: RMSNorm's two cast orders differ in bfloat16, dgamma needs a wide accumulator",
          "[tutorials][precision]") {
    const lab::CastOrder c = lab::rms_norm_cast_order();
    CHECK(c.fraction_differ > 0.05);
    CHECK(c.max_diff_ulps == 1);
    CHECK(c.max_rel_err_after <= 0x1p-8 * 1.001);   // one rounding: u (float32's own error adds ~1e-7)
    CHECK(c.max_rel_err_before <= 0x1p-7 * 1.001);  // two roundings: 2u
    CHECK(c.max_rel_err_before > c.max_rel_err_after);
    const std::vector<lab::DgammaRow> d = lab::dgamma_study({256, 16384});
    REQUIRE(d.size() == 2);
    CHECK(d[1].rows == 16384);
    CHECK(d[1].err_bf16 > 0.1);
    CHECK(d[1].err_f16 > d[0].err_f16);
    CHECK(d[1].err_f32 < 1e-4);
    CHECK(d[1].err_f64 < 1e-12);
}

}  // namespace xg_test_tutorials_precision_lab
