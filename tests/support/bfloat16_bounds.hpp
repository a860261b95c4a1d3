// How far a bfloat16 run may be from the float64 run on the same values (issue 41): derived error
// bounds, elementwise, first order in the unit roundoffs (gamma_n = n u for a sum of n terms).
//
// The inputs are bfloat16 numbers held exactly in both runs, so the float64 run is the exact
// result up to float64 rounding. A bfloat16 kernel computes in float (u_f = 2^-24) or double and
// rounds each stored result once (u_b = 2^-8): an op's bound is u_b |exact| for its store plus the
// float arithmetic's gamma_n u_f times the sum of the magnitudes of its terms (the condition of the
// sum), plus what the errors of its bfloat16 inputs (earlier ops' stores) become through it.
#pragma once

#include <cmath>
#include <cstddef>
#include <random>

#include "xgrad/xgrad.hpp"

namespace xg::test {

constexpr double kBf16U = 0.00390625;            // 2^-8, bfloat16's unit roundoff
constexpr double kFloatU = 5.9604644775390625e-08;  // 2^-24, float's

/// A (rows, cols) float64 array of normal values (mean `mean`, deviation `scale`) rounded to
/// bfloat16, so that a float64 and a bfloat16 tensor hold the same numbers.
inline Array bf16_values(const Shape& shape, unsigned seed, double scale = 1.0, double mean = 0.0) {
    std::mt19937 gen(seed);
    std::normal_distribution<double> normal(mean, scale);
    Array a = Array::from_shape(shape);
    for (double& v : a) v = normal(gen);
    return to_float64_array(round_to_storage<bfloat16>(a));
}

/// A B^T for A (m, k) and B (n, k), in double.
inline Array product_t(const Array& a, const Array& b) {
    const std::size_t m = a.shape()[0], k = a.shape()[1], n = b.shape()[0];
    Array out = xt::zeros<double>({m, n});
    for (std::size_t i = 0; i < m; ++i) {
        for (std::size_t j = 0; j < n; ++j) {
            double s = 0.0;
            for (std::size_t t = 0; t < k; ++t) s += a(i, t) * b(j, t);
            out(i, j) = s;
        }
    }
    return out;
}

/// |A| |B|^T for A (m, k) and B (n, k): the magnitudes a product's k terms add up to.
inline Array abs_product_t(const Array& a, const Array& b) { return product_t(xt::abs(a), xt::abs(b)); }

/// Array a transposed (2-D), evaluated.
inline Array transposed(const Array& a) { return Array(xt::transpose(a)); }

/// Standard normal density and distribution function.
inline double normal_pdf(double x) { return 0.39894228040143267794 * std::exp(-0.5 * x * x); }
inline double normal_cdf(double x) { return 0.5 * std::erfc(-x * 0.70710678118654752440); }

/// max over elements of |got - want| / bound (<= 1 when the bound holds), for the report.
inline double worst_ratio(const Array& got, const Array& want, const Array& bound) {
    double worst = 0.0;
    for (std::size_t i = 0; i < got.size(); ++i) {
        const double err = std::fabs(got.data()[i] - want.data()[i]);
        worst = std::max(worst, err == 0.0 ? 0.0 : err / bound.data()[i]);
    }
    return worst;
}

}  // namespace xg::test
