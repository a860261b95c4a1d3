// What the tier tests of the normalisations share (tests/<norm>/test_<norm>_tiers.cpp, `ctest -L
// tiers`): random inputs, a thread-count guard, and THE tolerance between a fast kernel (nn/fast/)
// and its reference kernel (nn/reference/).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <xtensor/xmath.hpp>

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

/// scale * N(0, 1) + shift, from its own generator (the same values whatever ran before).
inline xg::Array random_array(const xg::Shape& shape, std::uint64_t seed, double scale = 1.0, double shift = 0.0) {
    xg::Generator gen(seed);
    xg::Array a = xg::randn(shape, gen).value() * scale + shift;
    return a;
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

/// The float32 kernels (T = float, nn/fast vs nn/reference): both compute in double from the same
/// float values, so before their final store to float they differ by at most tier_tolerance; each
/// rounding to float then moves a value v by at most u |v| (u = 2^-24), so the stored results may
/// differ by that plus 2 u max |reference| (one float ulp where the two doubles straddle a rounding
/// boundary). Statistics and dw, db stay double: check_tiers_agree applies unchanged to them.
inline void check_float_tiers_agree(const std::string& what, const xg::FloatArray& fast, const xg::FloatArray& reference,
                                    std::size_t terms, double magnitude = 0.0) {
    REQUIRE(fast.shape() == reference.shape());
    const xg::Array f = xg::to_float64_array(fast), r = xg::to_float64_array(reference);
    const double worst = r.size() == 0 ? 0.0 : xt::amax(xt::abs(f - r))();
    const double max_ref = r.size() == 0 ? 0.0 : xt::amax(xt::abs(r))();
    const double tolerance = tier_tolerance(r, terms, magnitude) + 2.0 * std::ldexp(1.0, -24) * max_ref;
    INFO(fmt::format("{} (float32): max |fast - reference| = {:.3g}, tolerance {:.3g} (ratio {:.3g})", what, worst, tolerance,
                     tolerance > 0 ? worst / tolerance : 0.0));
    if (std::getenv("XGRAD_PRINT_TIER_RATIOS") != nullptr) fmt::print("{:.3g}  {} (float32)\n", worst / tolerance, what);
    CHECK(worst <= tolerance);
    CHECK(std::isfinite(worst));
}

}  // namespace xg_test_support
