// What the tests of the tutorials' numbers share.
#pragma once

#include <vector>

#include <catch2/catch.hpp>

#include "core/engine/tensor.hpp"

namespace xg::test {

/// Each value of `got` (in storage order) within `tol` of `want`'s.
inline void check_values(const xg::Array& got, const std::vector<double>& want, double tol) {
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) CHECK(got.data()[i] == Approx(want[i]).margin(tol));
}

}  // namespace xg::test
