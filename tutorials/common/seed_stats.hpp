// Mean, spread and a paired comparison of a result measured over several seeds (tutorials 11
// and 16): a difference between two variants is reported only when it stands out of the spread.
#pragma once

#include <string>
#include <vector>

namespace tutorial_values {

/// Mean of the values.
double seed_mean(const std::vector<double>& v);
/// Sample standard deviation (n - 1): the seeds are a sample of the runs one could make.
double seed_std(const std::vector<double>& v);
/// "1.234 ± 0.012" with `precision` decimals.
std::string mean_pm_std(const std::vector<double>& v, int precision = 3);

/// b - a, seed by seed (the same seed gives both variants the same initial weights and batches),
/// with a two-sided paired t-test at 95 %.
struct PairedDifference {
    double mean = 0, std = 0;  ///< of the per-seed differences b - a
    double t = 0;              ///< mean / (std / sqrt(n)); infinite when every difference is equal
    double t_needed = 0;       ///< Student's t at 97.5 % with n - 1 degrees of freedom
    bool significant = false;  ///< |t| > t_needed
};
PairedDifference paired_difference(const std::vector<double>& a, const std::vector<double>& b);

/// "RMSNorm - LayerNorm: -0.004 ± 0.010, t = -0.7 (|t| > 4.30 needed): within the spread" (the
/// per-seed differences' mean ± std) - the line every seed comparison prints.
std::string describe(const PairedDifference& d, const std::string& b_name, const std::string& a_name, int precision = 3);

}  // namespace tutorial_values
