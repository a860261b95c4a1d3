// What the invariants and robustness tests of the fused ops share (tests/<op>/test_<op>_invariants.cpp,
// test_<op>_robustness.cpp): inputs from the seeded global generator, and the exact moments of a row
// or channel their expected values are built on.
#pragma once

#include <cstddef>

#include "core/engine/random.hpp"
#include "core/engine/tensor.hpp"

namespace xg::test {

/// N(0, 1) values from the global generator, so that xg::manual_seed at the top of a case fixes them.
inline Array randn_array(const Shape& shape) { return xg::randn(shape).value(); }

/// The mean and the biased variance of n double values, accumulated in long double: the reference
/// the fused ops' statistics are measured against, exact to far below their rounding.
struct ExactMoments {
    long double mean = 0, var = 0;
};

/// The moments of value(0), ..., value(n - 1) (a row, or a channel's column).
template <class Value>
ExactMoments exact_moments(std::size_t n, const Value& value) {
    ExactMoments m;
    for (std::size_t k = 0; k < n; ++k) m.mean += static_cast<long double>(value(k)) / n;
    for (std::size_t k = 0; k < n; ++k) m.var += (value(k) - m.mean) * (value(k) - m.mean) / n;
    return m;
}

}  // namespace xg::test
