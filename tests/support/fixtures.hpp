// Golden values made by scripts/make_fixtures.py (PyTorch); see tests/fixtures/README.md.
#pragma once

#include <string>

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <xtensor/xnpy.hpp>

#include "core/ops/ops.hpp"

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

/// The golden tolerance of tests/fixtures/README.md: 1e-12 relative, |a - b| / max(1, |b|).
constexpr double kGoldenTol = 1e-12;

/// Prints the worst relative error of `got` against PyTorch's `want`, and checks it is below tol.
inline void expect_close(const std::string& what, const Array& got, const Array& want, double tol = kGoldenTol) {
    const double err = max_rel_diff(got, want);
    fmt::print("golden {:<52} worst rel err {:.2e}\n", what, err);
    INFO(what);
    CHECK(err < tol);
}

/// A fixture array as a leaf tensor (requires_grad by default).
inline Tensor leaf(const std::string& test_case, const std::string& name, bool requires_grad = true) {
    return Tensor(fixture(test_case, name), requires_grad);
}

/// A 0/1 int64 fixture array as a boolean mask.
inline Mask as_mask(const IndexArray& zero_one) {
    Mask m = Mask::from_shape(zero_one.shape());
    for (std::size_t i = 0; i < m.size(); ++i) m.data()[i] = zero_one.data()[i] != 0;
    return m;
}

}  // namespace xg::test
