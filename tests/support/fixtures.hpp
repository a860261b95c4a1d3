// Golden values made by scripts/make_fixtures.py (PyTorch); see tests/fixtures/README.md.
#pragma once

#include <string>

#include <catch2/catch.hpp>
#include <xtensor/xnpy.hpp>

#include "core/ops.hpp"

namespace xg::test {

inline std::string fixture_path(const std::string& test_case, const std::string& name) {
    return std::string(XGRAD_FIXTURES_DIR) + "/" + test_case + "/" + name + ".npy";
}

/// A float64 fixture array.
inline Array fixture(const std::string& test_case, const std::string& name) {
    return xt::load_npy<double>(fixture_path(test_case, name));
}

/// An int64 fixture array (indices, targets).
inline IndexArray fixture_index(const std::string& test_case, const std::string& name) {
    return xt::load_npy<std::int64_t>(fixture_path(test_case, name));
}

/// Largest |a - b| / max(1, |b|) over all elements; shapes must match.
inline double max_rel_diff(const Array& a, const Array& b) {
    REQUIRE(Shape(a.shape().begin(), a.shape().end()) == Shape(b.shape().begin(), b.shape().end()));
    double worst = 0.0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const double d = std::abs(a.data()[i] - b.data()[i]) / std::max(1.0, std::abs(b.data()[i]));
        worst = std::max(worst, d);
    }
    return worst;
}

}  // namespace xg::test
