// What the golden-value tests of the fused ops share (tests/<area>/test_<area>_golden.cpp): a case
// that compares xgrad's arrays with PyTorch's fixtures (tests/fixtures/README.md) and prints its
// worst relative difference.
#pragma once

#include <algorithm>
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/engine/tensor.hpp"
#include "tests/support/fixtures.hpp"

namespace xg::test::golden {

/// The relative tolerance of a float64 result against PyTorch's float64 one.
constexpr double kTol = 1e-12;

/// Tracks the worst relative difference of one case (its name's first word is the fixture's
/// folder) and prints it at the end.
struct Golden {
    std::string name;
    double tol = kTol;
    double worst = 0.0;

    void expect(const Array& got, const std::string& file) {
        const double d = max_rel_diff(got, fixture(name.substr(0, name.find(' ')), file));
        INFO(name << " " << file << ": max relative difference " << d);
        CHECK(d <= tol);
        worst = std::max(worst, d);
    }
    ~Golden() { fmt::print("golden {:<34} worst rel err vs PyTorch {:.2e}\n", name, worst); }
};

/// The fixture array `name` of `test_case` as a leaf.
inline Tensor load(const std::string& test_case, const std::string& name, bool requires_grad = true) {
    return Tensor(fixture(test_case, name), requires_grad);
}

/// The suffix naming which of an op's two forms a case ran.
inline const char* twin(bool composed) { return composed ? " (composed)" : " (fused)"; }

}  // namespace xg::test::golden
