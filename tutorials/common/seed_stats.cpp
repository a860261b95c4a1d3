#include "tutorials/common/seed_stats.hpp"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "core/engine/tensor.hpp"
#include "tutorials/common/tutorial.hpp"

namespace tutorial_values {

double seed_mean(const std::vector<double>& v) {
    if (v.empty()) xg::fail("seed_mean", "no values");
    double s = 0;
    for (double x : v) s += x;
    return s / static_cast<double>(v.size());
}

double seed_std(const std::vector<double>& v) {
    if (v.size() < 2) return 0.0;
    const double m = seed_mean(v);
    double s = 0;
    for (double x : v) s += (x - m) * (x - m);
    return std::sqrt(s / static_cast<double>(v.size() - 1));
}

std::string mean_pm_std(const std::vector<double>& v, int precision) {
    return xg::tutorial::num(seed_mean(v), precision) + " ± " + xg::tutorial::num(seed_std(v), precision);
}

PairedDifference paired_difference(const std::vector<double>& a, const std::vector<double>& b) {
    if (a.size() != b.size() || a.size() < 2) xg::fail("paired_difference", "needs two equally long lists of at least 2 values");
    // Student's t, two-sided 95 %, for 1..10 degrees of freedom.
    static const double kT975[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228};
    std::vector<double> diff;
    for (std::size_t i = 0; i < a.size(); ++i) diff.push_back(b[i] - a[i]);
    PairedDifference d;
    d.mean = seed_mean(diff);
    d.std = seed_std(diff);
    const std::size_t dof = diff.size() - 1;
    d.t_needed = dof <= 10 ? kT975[dof - 1] : 1.96;
    d.t = d.std > 0 ? d.mean / (d.std / std::sqrt(static_cast<double>(diff.size())))
                    : (d.mean == 0 ? 0.0 : std::copysign(std::numeric_limits<double>::infinity(), d.mean));
    d.significant = std::fabs(d.t) > d.t_needed;
    return d;
}

std::string describe(const PairedDifference& d, const std::string& b_name, const std::string& a_name, int precision) {
    return fmt::format("{} - {}: {} ± {}, t = {} (|t| > {} needed): {}", b_name, a_name, xg::tutorial::num(d.mean, precision),
                       xg::tutorial::num(d.std, precision), xg::tutorial::num(d.t, 1), xg::tutorial::num(d.t_needed, 2),
                       d.significant ? "beyond the spread" : "within the spread");
}

}  // namespace tutorial_values
