// Computations of tutorial 04 (variance): one-pass E[x^2] - E[x]^2 vs two-pass vs Welford on rows
// with a large mean, and what each does to LayerNorm's output.
#pragma once

#include <vector>

#include "core/engine/tensor.hpp"

namespace tutorial_values {

/// Biased variance of x[0..n) by three textbook algorithms and the library's two.
double variance_one_pass(const double* x, std::size_t n);   ///< E[x^2] - E[x]^2
double variance_two_pass(const double* x, std::size_t n);   ///< mean first, then E[(x - mean)^2]
double variance_welford(const double* x, std::size_t n);    ///< running mean and M2, one pass

/// x = offset + [2, 4, 6, 8]: true variance 5, true LayerNorm output [-1.34164, ...].
struct OffsetRow {
    double offset = 0;
    double one_pass = 0, two_pass = 0, welford = 0;
    double library_var = 0;          ///< xg::var (two-pass)
    double ln_first_one_pass = 0;    ///< LayerNorm's first output using the one-pass variance
    double ln_first_library = 0;     ///< nn::LayerNorm's first output
};
std::vector<OffsetRow> offset_rows();

/// Rows of randn(16, 768) + offset: worst relative error of each variance against a long-double
/// two-pass reference, and the worst LayerNorm output error of the library against that reference.
struct WideRows {
    double offset = 0;
    double err_one_pass = 0, err_two_pass = 0, err_welford = 0, err_library_var = 0;
    double ln_max_abs_err = 0;
};
std::vector<WideRows> wide_rows();

}  // namespace tutorial_values
