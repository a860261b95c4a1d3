// Shared by the tier tests (tests/<area>/test_<area>_tiers.cpp, `ctest -L tiers`): run the same
// work on the reference and the fast kernels (core/engine/kernel_tier.hpp) at a given thread count,
// and compare the results element by element against a tolerance each test derives from its
// arithmetic.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/engine/kernel_tier.hpp"
#include "core/engine/tensor.hpp"
#include "core/engine/threads.hpp"

namespace xg::test {

/// The unit roundoff of a double, 2^-53: one rounding changes a value v by at most |v| u.
constexpr double kUnitRoundoff = std::numeric_limits<double>::epsilon() / 2;

/// The kernels that run the tests' work.
struct TierRun {
    KernelTier tier;
    int threads;
    std::string name() const { return fmt::format("{} tier at {} thread(s)", tier == KernelTier::reference ? "reference" : "fast", threads); }
};

/// The fast tier at 1 and 3 threads, each compared with the reference tier at 1 thread.
inline const std::vector<TierRun>& fast_runs() {
    static const std::vector<TierRun> runs{{KernelTier::fast, 1}, {KernelTier::fast, 3}};
    return runs;
}

/// Runs f() on `run`'s tier and thread count, then restores both.
template <class F>
auto on(const TierRun& run, F&& f) {
    const int saved_threads = get_num_threads();
    KernelTierGuard tier(run.tier);
    set_num_threads(run.threads);
    struct Restore {
        int threads;
        ~Restore() { set_num_threads(threads); }
    } restore{saved_threads};
    return f();
}

/// Requires |fast - reference| <= tolerance elementwise (same shapes; NaN only where both are NaN,
/// an infinity only where both hold the same one). On failure the worst element is shown.
inline void require_within(const Array& fast, const Array& reference, const Array& tolerance, const std::string& what) {
    INFO(what);
    REQUIRE(std::vector<std::size_t>(fast.shape().begin(), fast.shape().end()) ==
            std::vector<std::size_t>(reference.shape().begin(), reference.shape().end()));
    REQUIRE(tolerance.size() == reference.size());
    std::size_t worst = 0;
    double worst_ratio = 0.0;
    for (std::size_t k = 0; k < reference.size(); ++k) {
        const double f = fast.data()[k], r = reference.data()[k], t = tolerance.data()[k];
        double ratio = 0.0;
        if (std::isnan(f) || std::isnan(r) || std::isinf(f) || std::isinf(r)) {
            const bool same = (std::isnan(f) && std::isnan(r)) || f == r;
            ratio = same ? 0.0 : std::numeric_limits<double>::infinity();
        } else if (f != r) {
            ratio = t > 0.0 ? std::fabs(f - r) / t : std::numeric_limits<double>::infinity();
        }
        if (ratio > worst_ratio || k == 0) worst = k, worst_ratio = ratio;
    }
    if (std::getenv("XGRAD_TIERS_VERBOSE") != nullptr) {  // how much of each tolerance the tiers use
        fmt::print("{}: {:.3g} of the tolerance at element {} (|fast - reference| = {:.3g})\n", what, worst_ratio, worst,
                   std::fabs(fast.data()[worst] - reference.data()[worst]));
    }
    INFO(fmt::format("worst element {} of {}: fast {:.17g}, reference {:.17g}, tolerance {:.3g} ({:.3g} of it used)", worst,
                     reference.size(), fast.data()[worst], reference.data()[worst], tolerance.data()[worst], worst_ratio));
    REQUIRE(worst_ratio <= 1.0);
}

/// A tolerance of `ulps` units of roundoff of each element of `scale`.
inline Array ulps_of(const Array& scale, double ulps) {
    Array t = Array::from_shape(scale.shape());
    for (std::size_t k = 0; k < scale.size(); ++k) t.data()[k] = ulps * kUnitRoundoff * std::fabs(scale.data()[k]);
    return t;
}

}  // namespace xg::test
