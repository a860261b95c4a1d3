// What the tier tests of the normalisations share (tests/<norm>/test_<norm>_tiers.cpp, `ctest -L
// tiers`): random inputs, a thread-count guard, and THE tolerance between a fast kernel (nn/fast/)
// and its reference kernel (nn/reference/).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <xtensor/xmath.hpp>

#include "core/engine/kernel_tier.hpp"
#include "core/engine/random.hpp"
#include "core/engine/threads.hpp"

namespace xg_test_support {

/// The thread counts the tiers are compared at: one thread, and three (the fast kernels split
/// rows and chunks differently, the reference never does).
constexpr int kTierThreadCounts[] = {1, 3};

/// Restores the thread count of the test program when a case ends.
struct ThreadCountGuard {
    int saved = xg::get_num_threads();
    ~ThreadCountGuard() { xg::set_num_threads(saved); }
};

/// A (rows, D) problem of the row normalisations (LayerNorm, RMSNorm).
struct Shape2 {
    std::size_t rows, D;
};

/// Runs kernels(fast) on the reference tier (false), then on the fast tier (true), at each of
/// kTierThreadCounts, and hands both results to compare(fast, reference, at), `at` naming `what` and
/// the thread count for the messages.
template <class Kernels, class Compare>
void compare_kernel_tiers(const std::string& what, const Kernels& kernels, const Compare& compare) {
    ThreadCountGuard restore;
    for (int threads : kTierThreadCounts) {
        xg::set_num_threads(threads);
        const auto reference = kernels(false);
        const auto fast = kernels(true);
        compare(fast, reference, fmt::format("{} at {} threads", what, threads));
    }
}

/// Runs f(fast) with the op-level kernel tier set to the reference (fast = 0), then to the fast
/// tier (fast = 1): the op-level cases keep each tier's tensors at index `fast`.
template <class F>
void on_each_tier(const F& f) {
    for (int fast = 0; fast < 2; ++fast) {
        const xg::KernelTierGuard tier(fast ? xg::KernelTier::fast : xg::KernelTier::reference);
        f(fast);
    }
}

/// scale * N(0, 1) + shift, from its own generator (the same values whatever ran before).
inline xg::Array random_array(const xg::Shape& shape, std::uint64_t seed, double scale = 1.0, double shift = 0.0) {
    xg::Generator gen(seed);
    xg::Array a = xg::randn(shape, gen).value() * scale + shift;
    return a;
}

/// Scales at which a float32 row's squares leave float's range (|d| > 2^64 ~ 1.8e19): the fast
/// float kernels must hand those rows to double arithmetic (issue 40, item 3).
constexpr double kHugeFloatScales[] = {1e19, 1e30, 3.4028234663852886e38 / 2};

/// Rows of N(0, 1) values scaled so that the largest |x| is `scale` (finite in float), the last row
/// constant at `scale` (its sum overflows float, its deviations are 0).
inline xg::FloatArray huge_float_rows(std::size_t rows, std::size_t D, std::uint64_t seed, double scale) {
    xg::Array a = random_array({rows, D}, seed);
    a *= scale / xt::amax(xt::abs(a))();
    for (std::size_t j = 0; j < D; ++j) a(rows - 1, j) = scale;
    xg::FloatArray f = xg::to_float32_array(a);
    for (float v : f) REQUIRE(std::isfinite(v));
    return f;
}

/// Calls check(what, x, rows, D) with x = huge_float_rows(rows, D, seed, scale) for each of `shapes`
/// at each of kHugeFloatScales, `what` naming the scale.
template <class Check>
void on_huge_float_rows(std::initializer_list<Shape2> shapes, std::uint64_t seed, const Check& check) {
    for (const double scale : kHugeFloatScales) {
        for (const Shape2& shape : shapes) {
            check(fmt::format("x up to {:.3g}", scale), huge_float_rows(shape.rows, shape.D, seed, scale), shape.rows, shape.D);
        }
    }
}

/// The tolerance. The two tiers compute the same formulas, in the same order of operations within
/// a term, but sum in different orders: the fast kernels keep 8 partial sums per row (and per
/// thread chunk), the reference kernels one running sum. A sum of K terms rounds each partial sum
/// at every step; with errors of random sign the two orders differ by about sqrt(K) ulps of the
/// sum's magnitude (K ulps in the worst case, which random data does not reach). Everything else
/// (mean, rstd, xhat, then y or dx) is a few well-conditioned operations on those sums, which add
/// a few ulps more. So each result array must satisfy
///     max |fast - reference| <= 4 * eps * sqrt(K) * max(max |reference|, magnitude)
/// with K the longest sum it depends on (D for a row, N L for a channel, max(D, rows) for dw, db),
/// eps = 2^-52, and `magnitude` the size of the terms a result is the difference of, when they
/// cancel: dx = w rstd (g - mean(g) - xhat mean(g xhat)) is tiny when a channel has two values
/// (xhat = +-1), but its rounding errors are those of |w| rstd |g|. The measured worst case over
/// every array of the tier tests is 0.15 of this bound (2026-12-02); a changed formula (D + 1
/// for D, a wrong sign, eps in the wrong place) misses it by orders of magnitude.
inline double tier_tolerance(const xg::Array& reference, std::size_t terms, double magnitude = 0.0) {
    const double scale = std::max(reference.size() == 0 ? 0.0 : xt::amax(xt::abs(reference))(), magnitude);
    return 4.0 * std::numeric_limits<double>::epsilon() * std::sqrt(static_cast<double>(terms)) * scale;
}

/// The magnitude of dx's terms for tier_tolerance: max |w| max rstd max |g|.
inline double dx_magnitude(const xg::Array& w, const xg::Array& rstd, const xg::Array& g) {
    return xt::amax(xt::abs(w))() * xt::amax(xt::abs(rstd))() * xt::amax(xt::abs(g))();
}

inline void check_tiers_agree(const std::string& what, const xg::Array& fast, const xg::Array& reference, std::size_t terms,
                              double magnitude = 0.0) {
    REQUIRE(fast.shape() == reference.shape());
    const double worst = reference.size() == 0 ? 0.0 : xt::amax(xt::abs(fast - reference))();
    const double tolerance = tier_tolerance(reference, terms, magnitude);
    INFO(fmt::format("{}: max |fast - reference| = {:.3g}, tolerance {:.3g} (ratio {:.3g})", what, worst, tolerance,
                     tolerance > 0 ? worst / tolerance : 0.0));
    if (std::getenv("XGRAD_PRINT_TIER_RATIOS") != nullptr) fmt::print("{:.3g}  {}\n", worst / tolerance, what);
    CHECK(worst <= tolerance);
    CHECK(std::isfinite(worst));
}

}  // namespace xg_test_support

namespace xg_test_support {

/// The magnitudes that bound the rounding of the fast float32 kernels of LayerNorm and RMSNorm,
/// which compute in float and sum in double (docs/precision.md, "Accumulators"), computed in double
/// from the inputs of a (rows, D) problem: s = max |xhat|, the largest rstd (rrms) and 1/rstd,
/// G = max |g| max |w|, the largest |w| and |b|, and the largest column sum of |g| (over the rows).
/// `centred`: LayerNorm (xhat = (x - mean) rstd) or RMSNorm (xhat = x rrms). An empty w or b is 1 or 0.
struct FloatArithmeticScales {
    double s = 0, rstd = 0, sigma = 0, G = 0, w = 1, b = 0, g_column = 0;
};

inline FloatArithmeticScales float_arithmetic_scales(const xg::Array& x, const xg::Array& g, const xg::Array& w, const xg::Array& b,
                                                     std::size_t rows, std::size_t D, bool centred, double eps) {
    FloatArithmeticScales k;
    const double* px = x.data();
    double g_max = 0;
    for (std::size_t r = 0; r < rows; ++r) {
        double mean = 0, var = 0;
        if (centred) {
            for (std::size_t j = 0; j < D; ++j) mean += px[r * D + j];
            mean /= static_cast<double>(D);
        }
        for (std::size_t j = 0; j < D; ++j) var += (px[r * D + j] - mean) * (px[r * D + j] - mean);
        const double rstd = 1.0 / std::sqrt(var / static_cast<double>(D) + eps);
        k.rstd = std::max(k.rstd, rstd), k.sigma = std::max(k.sigma, 1.0 / rstd);
        for (std::size_t j = 0; j < D; ++j) k.s = std::max(k.s, std::fabs(px[r * D + j] - mean) * rstd);
    }
    for (double v : g) g_max = std::max(g_max, std::fabs(v));
    if (w.size() > 0) k.w = xt::amax(xt::abs(w))();
    if (b.size() > 0) k.b = xt::amax(xt::abs(b))();
    k.G = g_max * k.w;
    for (std::size_t j = 0; j < D; ++j) {
        double column = 0;
        for (std::size_t r = 0; r < rows; ++r) column += std::fabs(g.data()[r * D + j]);
        k.g_column = std::max(k.g_column, column);
    }
    return k;
}

/// A fast float32 result (or its double statistic, dw, db) against the reference kernel's: the fast
/// kernel is off the exact result on the same float32 inputs by at most condition * u * magnitude
/// (u = 2^-24; each test derives condition and magnitude from the float roundings on the way to the
/// result, next to its call), the reference by at most one rounding to float (u max |reference|) and
/// its own double rounding (tier_tolerance). The worst measured ratio is printed with
/// XGRAD_PRINT_TIER_RATIOS.
inline void check_float_arithmetic_agrees(const std::string& what, const xg::Array& fast, const xg::Array& reference, double condition,
                                          double magnitude, std::size_t terms) {
    REQUIRE(fast.shape() == reference.shape());
    const double u = std::ldexp(1.0, -24);
    const double worst = reference.size() == 0 ? 0.0 : xt::amax(xt::abs(fast - reference))();
    const double max_ref = reference.size() == 0 ? 0.0 : xt::amax(xt::abs(reference))();
    const double tolerance = condition * u * magnitude + u * max_ref + tier_tolerance(reference, terms);
    INFO(fmt::format("{} (float arithmetic): max |fast - reference| = {:.3g}, tolerance {:.3g} (ratio {:.3g})", what, worst, tolerance,
                     tolerance > 0 ? worst / tolerance : 0.0));
    if (std::getenv("XGRAD_PRINT_TIER_RATIOS") != nullptr) fmt::print("{:.3g}  {} (float arithmetic)\n", worst / tolerance, what);
    CHECK(worst <= tolerance);
    CHECK(std::isfinite(worst));
}

inline void check_float_arithmetic_agrees(const std::string& what, const xg::FloatArray& fast, const xg::FloatArray& reference,
                                          double condition, double magnitude, std::size_t terms) {
    check_float_arithmetic_agrees(what, xg::to_float64_array(fast), xg::to_float64_array(reference), condition, magnitude, terms);
}

/// The conditions of the fast float32 kernels, derived by counting roundings (each float operation
/// rounds by at most u of its result; a float block sum of kFloatBlock = 8 terms, per lane or per
/// column over 8 rows, by at most 7 u of its terms' magnitudes; double sums and rounding statistics
/// to float add at most u): bounds on |fast - exact| in units of u times the magnitude named.
///
/// LayerNorm (s = max |xhat|):
///   mean: the corrected pass sums d = (x - hi) - lo (2 u |d|) in blocks (7 u): 9 u sigma.
///   rstd: var sums d^2 (5 u) in blocks (7 u): 12 u relative, so rstd 6 u relative.
///   xhat = d rstd_f: 9 u (mean) + (2 + 6.5 + 1) u |xhat| <= 10 u (1 + s) absolute.
///   y = xhat w + b: |w| 10 u (1 + s) + 2 roundings: 12 u (max|w| (1 + s) + max|b|).
///   dx = rstd_f ((dxhat - mean dxhat) - xhat mean(dxhat xhat)): mean dxhat 9 u G, mean(dxhat xhat)
///     20 u G (1 + s), their products and subtractions with xhat's 10 u (1 + s): the bracket
///     46 u G (1 + s)^2; rstd_f and the product 7.5 u more: 54 u rstd G (1 + s)^2.
///   dw = sum of float g xhat (11 u |g| (1 + s)) in 8-row blocks (7 u |g| s): 18 u (1 + s) sum|g|.
///   db = sum of g in 8-row blocks: 7 u sum|g|.
/// RMSNorm (s = max |xhat|):
///   rrms: sum x^2 (u) in blocks (7 u): 8 u relative, so rrms 4 u (and 0.5 u as float).
///   y = (x rrms_f) w: 4.5 + 2 roundings: 7 u max|w| s (relative to each entry, bounded normwise).
///   dx = rrms_f (dxhat - xhat mean(dxhat xhat)): the mean 15.5 u G s, its product with xhat
///     22 u G s^2, the subtraction and dxhat u G (1 + s^2): the bracket u G (2 + 23 s^2); rrms_f and
///     the product 5.5 u more: 29 u rrms G (1 + s^2).
///   dw = sum of float g xhat (6.5 u |g| s) in 8-row blocks (7 u |g| s): 13.5 u s sum|g|.
/// These are worst cases (every rounding the same sign); random data stays one to two orders below.
struct FloatArithmeticConditions {
    static constexpr double ln_mean = 9, ln_rstd = 6, ln_y = 12, ln_dx = 54, ln_dw = 18, ln_db = 7;
    static constexpr double rms_rrms = 4, rms_y = 7, rms_dx = 29, rms_dw = 13.5;
};

}  // namespace xg_test_support
