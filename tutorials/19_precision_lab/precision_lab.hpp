// Computations of tutorial 19 (the precision lab): where LayerNorm's and RMSNorm's arithmetic breaks
// in float32, float16 and bfloat16, measured against float64 on plain arrays. float16 and bfloat16
// are emulated (number_formats.hpp); the variance algorithms are in variance_algorithms.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tutorials/19_precision_lab/number_formats.hpp"
#include "tutorials/19_precision_lab/variance_algorithms.hpp"

namespace tutorial_values::precision_lab {

// ---- 1. where each variance algorithm collapses --------------------------------------------------

/// The mu/sigma at which the condition number kappa = sqrt(1 + (mu/sigma)^2) reaches kappa^2 u = 1
/// (one-pass's predicted collapse) and kappa u = 1 (two-pass's, and the storage's own).
double predicted_one_pass_collapse(double unit_roundoff);
double predicted_two_pass_collapse(double unit_roundoff);

struct CollapseConfig {
    std::vector<std::size_t> lengths{64, 1024, 8192};  ///< row lengths
    int points_per_decade = 4;                          ///< mu/sigma = 10^(k / points_per_decade), 1 .. 1e7
    std::size_t rows_per_point = 3;                     ///< the error at a point is the median over these rows
    std::uint64_t seed = 19;
};

/// One (storage, accumulator, algorithm) over the grid. algorithm "storage" is the storage row: the
/// exact variance of the stored values against that of the float64 data, whatever the algorithm.
struct CollapseRow {
    std::string storage, accumulator, algorithm;
    double predicted = 0;            ///< mu/sigma where the theory puts the collapse; 0: no prediction
    std::vector<double> collapse;    ///< per length: the first mu/sigma whose error is >= 1; 0: none
    std::vector<std::vector<double>> error;  ///< [length][point] median relative error; NaN: no spread left
};

struct CollapseStudy {
    std::vector<std::size_t> lengths;
    std::vector<double> ratios;  ///< the mu/sigma grid
    std::vector<CollapseRow> rows;
};

/// Rows x = mu + sigma z (z standard normal, mu^2 + sigma^2 = 1) stored in each format and reduced by
/// every algorithm with each accumulator: the relative error against the float64 two-pass variance
/// of the same stored values (so it is the algorithm's error alone; the storage rows show what the
/// storing costs).
CollapseStudy collapse_study(const CollapseConfig& config);

// ---- 2. PyTorch issues 40302 and 51102 ------------------------------------------------------------

/// One algorithm over the rows of 40302's input.
struct IssueAlgorithmRow {
    std::string algorithm, accumulator;
    std::size_t zero_rows = 0;    ///< rows whose variance (clamped at 0, as kernels do) is exactly 0
    double max_rel_err = 0;       ///< against the float64 two-pass variance of the float32 values
};
/// randn(rows, 32768) * 0.01 + 100 in float32 (issue 40302: one-pass variance exactly 0).
struct Issue40302 {
    std::size_t rows = 0, cols = 0;
    double true_var_min = 0, true_var_max = 0;
    std::vector<IssueAlgorithmRow> algorithms;
};
Issue40302 issue_40302(std::size_t rows);

/// randn(rows, 4) + 2000 in float32 (issue 51102: 5 rows): per row, the variance and the variance
/// of LayerNorm's output (eps 1e-5, no affine) with a one-pass (clamped at 0) and a two-pass float32
/// variance, and with xgrad's layer_norm (float64).
struct Issue51102Row {
    double true_var = 0, one_pass_var = 0;
    double out_var_one_pass = 0, out_var_two_pass = 0, out_var_xgrad = 0;
};
std::vector<Issue51102Row> issue_51102(std::size_t rows);

/// The same failure in float64, where one-pass needs kappa^2 2^-53 > 1: randn(rows, 768) + offset,
/// LayerNorm with eps 1e-5, the output rows' variance (should be var / (var + eps), ~1).
struct Float64Collapse {
    double offset = 0;
    double worst_one_pass = 0;      ///< the output variance farthest from 1, one-pass float64 LayerNorm
    double worst_reference = 0;     ///< ... xgrad's layer_norm on the reference kernels
    double worst_fast = 0;          ///< ... on the fast kernels
};
Float64Collapse float64_collapse(double offset, std::size_t rows);

/// Biased variance of each output row of a (rows, cols) row-major array (float64 two-pass).
std::vector<double> row_variances(const std::vector<double>& y, std::size_t rows, std::size_t cols);

// ---- 3. eps in float16 ----------------------------------------------------------------------------

/// LayerNorm (no affine) of one row in pure float16 (float16 storage and accumulator, two-pass,
/// eps stored in float16): rstd = 1 / sqrt(var + eps) (inside) or 1 / (sqrt(var) + eps) (outside),
/// y = (x - mean) rstd. Returned as doubles.
std::vector<double> layer_norm_float16(const std::vector<Float16>& x, double eps, bool eps_inside);
/// The same with float32 statistics (the mixed-precision kernel): y rounded to float16 at the end.
std::vector<double> layer_norm_float16_f32_stats(const std::vector<Float16>& x, double eps, bool eps_inside);

struct EpsCell {
    double eps = 0;
    bool inside = true;
    std::size_t nonfinite = 0;  ///< NaN or inf outputs, of the row's length
    double max_err = 0;         ///< largest |y - y64| over the finite outputs (y64: float64, same eps)
};
struct EpsRow {
    double sigma = 0;  ///< 0: the constant (all-zero) row of issue 41527
    std::vector<EpsCell> cells;           ///< pure float16
    std::size_t nonfinite_f32_stats = 0;  ///< float32 statistics, eps 1e-12 inside: non-finite outputs
};
/// Rows of length 768, mean 0, shrinking sigma (1 .. 1e-5) and the all-zero row; eps 1e-12, 1e-5,
/// 1e-3, inside and outside the root.
std::vector<EpsRow> eps_study();

// ---- 4. RMSNorm cast order in bfloat16 ---------------------------------------------------------------

struct CastOrder {
    std::size_t elements = 0;
    double fraction_differ = 0;   ///< outputs where the two orders disagree
    double max_diff_ulps = 0;     ///< their largest difference, in bfloat16 units in the last place
    double max_rel_err_before = 0, max_rel_err_after = 0;    ///< against float64
    double mean_rel_err_before = 0, mean_rel_err_after = 0;
};
/// x (64, 768) and w (768) in bfloat16, statistics in float32, eps 1e-6: "before" casts x rstd back
/// to bfloat16 and multiplies by w in bfloat16 (Llama's order); "after" multiplies in float32 and
/// casts once (Gemma's order).
CastOrder rms_norm_cast_order();

// ---- 5. dgamma against the number of rows -----------------------------------------------------------

struct DgammaRow {
    std::size_t rows = 0;
    double err_f16 = 0, err_bf16 = 0, err_f32 = 0, err_f64 = 0;  ///< max over columns of the relative error
};
/// dgamma_j = sum over rows of g_rj xhat_rj (16 columns; g = 0.5 xhat + noise, so the sums grow
/// like rows / 2), summed row after row in each accumulator, against the exact float64 sum.
std::vector<DgammaRow> dgamma_study(const std::vector<std::size_t>& row_counts);

}  // namespace tutorial_values::precision_lab
