// Tutorial 19: the precision lab. Where LayerNorm's and RMSNorm's arithmetic breaks in float32,
// float16 and bfloat16, measured against float64 (issue 28, part 3): the variance algorithms and
// their collapse points against the condition-number prediction, PyTorch issues 40302, 51102 and
// 41527 reproduced with their own inputs, RMSNorm's cast order in bfloat16, and dgamma's error
// against the number of rows for each accumulator. float16 and bfloat16 are emulated in software
// (number_formats.hpp); nothing here uses a float32 Tensor: the lab works on plain arrays.
// Quick by default (three row lengths, dgamma up to 2^14 rows); --full: six lengths up to 32k,
// 5 rows per point, issue 40302's 1024 rows, dgamma up to 2^20 rows.
// Guide: docs/tutorials/19-precision-lab.md.
#include "tutorials/19_precision_lab/precision_lab.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "core/engine/kernel_tier.hpp"
#include "core/engine/random.hpp"
#include "nn/functional/normalization.hpp"
#include "tutorials/common/tutorial.hpp"

using namespace xg::tutorial;
namespace lab = tutorial_values::precision_lab;

namespace {

// A collapse point (a mu/sigma of the grid) as "1.8e3", or "-" when there is none on the grid.
std::string point(double ratio) {
    if (!(ratio > 0)) return "-";
    const int exponent = static_cast<int>(std::floor(std::log10(ratio) + 1e-9));
    double mantissa = std::round(ratio / std::pow(10.0, exponent) * 10) / 10;
    if (mantissa >= 10) return fmt::format("{:.1f}e{}", mantissa / 10, exponent + 1);
    return fmt::format("{:.1f}e{}", mantissa, exponent);
}

// A relative error, or what stands in for one.
std::string error_text(double e) {
    if (std::isnan(e)) return "no spread";
    if (std::isinf(e)) return "inf/NaN";
    return e == 0 ? "0" : sci(e, 1);
}

const lab::CollapseRow& find_row(const lab::CollapseStudy& s, const std::string& storage, const std::string& acc,
                                 const std::string& algorithm) {
    for (const auto& r : s.rows)
        if (r.storage == storage && r.accumulator == acc && r.algorithm == algorithm) return r;
    throw std::runtime_error("no row " + storage + "/" + acc + "/" + algorithm);
}

// Relative error against mu/sigma at one length for one-pass and two-pass in float32, float16 and
// bfloat16 (accumulator = storage), with the predicted kappa^2 u and kappa u lines.
void plot_collapse(const Tutorial& tut, const lab::CollapseStudy& s, std::size_t length_index) {
    const std::vector<std::string> formats{"float32", "float16", "bfloat16"};
    const std::vector<double> units{0x1p-24, 0x1p-11, 0x1p-8};
    std::vector<std::string> header{"mu_over_sigma"};
    for (const auto& f : formats) {
        header.push_back(f + "_one_pass");
        header.push_back(f + "_two_pass");
        header.push_back(f + "_kappa2u");
        header.push_back(f + "_kappau");
    }
    std::vector<std::vector<double>> rows;
    const double floor = 1e-9;
    for (std::size_t k = 0; k < s.ratios.size(); ++k) {
        const double r = s.ratios[k], kappa2 = 1 + r * r;
        rows.push_back({r});
        for (std::size_t f = 0; f < formats.size(); ++f) {
            for (const char* algorithm : {"one-pass", "two-pass"}) {
                const double e = find_row(s, formats[f], formats[f], algorithm).error[length_index][k];
                // NaN too at 1e3, as the title says: gnuplot skips a NaN point, which would hide a collapse
                rows.back().push_back(!std::isfinite(e) ? 1e3 : std::max(e, floor));
            }
            rows.back().push_back(kappa2 * units[f]);
            rows.back().push_back(std::sqrt(kappa2) * units[f]);
        }
    }
    const std::string stem = "19_precision_lab_collapse";
    const std::string csv = tut.out_path(stem + ".csv"), png = tut.out_path(stem + ".png");
    write_csv(csv, header, rows);
    const char* colours[] = {"#2471a3", "#c0392b", "#1e8449"};
    std::string plot = fmt::format(
        "set datafile separator ','\nset logscale xy\nset grid\nset key bottom right font ',9'\n"
        "set xlabel 'mu / sigma'\nset ylabel 'relative error of the variance (median of the rows)'\n"
        "set yrange [1e-9:1e3]\nset title \"rows of {}: measured (points), kappa^2 u (thin solid) and kappa u (dotted)\\n"
        "error 0 drawn at 1e-9, inf/NaN at 1e3\"\nplot ",
        s.lengths[length_index]);
    for (std::size_t f = 0; f < formats.size(); ++f) {
        const std::size_t c = 2 + 4 * f;
        plot += fmt::format("{}'{}' using 1:{} with linespoints pt 7 ps 0.6 lc rgb '{}' title '{} one-pass', "
                            "'{}' using 1:{} with linespoints pt 6 ps 0.6 dt 2 lc rgb '{}' title '{} two-pass', "
                            "'{}' using 1:{} with lines lw 1 lc rgb '{}' notitle, "
                            "'{}' using 1:{} with lines lw 1 dt 3 lc rgb '{}' notitle",
                            f ? ", " : "", csv, c, colours[f], formats[f], csv, c + 1, colours[f], formats[f], csv, c + 2,
                            colours[f], csv, c + 3, colours[f]);
    }
    plot += "\n";
    if (gnuplot(plot, png, 1000, 650)) tut.say("plot: " + png);
    tut.say("csv: " + csv);
}

void plot_dgamma(const Tutorial& tut, const std::vector<lab::DgammaRow>& rows) {
    std::vector<std::vector<double>> data;
    for (const auto& r : rows) {
        auto clip = [](double e) { return std::isfinite(e) ? std::max(e, 1e-17) : 1e3; };
        data.push_back({static_cast<double>(r.rows), clip(r.err_f16), clip(r.err_bf16), clip(r.err_f32), clip(r.err_f64)});
    }
    const std::string stem = "19_precision_lab_dgamma";
    const std::string csv = tut.out_path(stem + ".csv"), png = tut.out_path(stem + ".png");
    write_csv(csv, {"rows", "float16", "bfloat16", "float32", "float64"}, data);
    std::string plot = fmt::format(
        "set datafile separator ','\nset logscale xy\nset grid\nset key bottom right\nset yrange [1e-17:10]\n"
        "set xlabel 'rows summed'\n"
        "set ylabel 'max relative error of dgamma'\nset title 'dgamma = sum over rows of g xhat, by accumulator "
        "(inf drawn at 1e3)'\nplot '{0}' using 1:2 with linespoints pt 7 title 'float16', '{0}' using 1:3 with "
        "linespoints pt 7 title 'bfloat16', '{0}' using 1:4 with linespoints pt 7 title 'float32', '{0}' using "
        "1:5 with linespoints pt 7 title 'float64'\n",
        csv);
    if (gnuplot(plot, png, 900, 600)) tut.say("plot: " + png);
    tut.say("csv: " + csv);
}

}  // namespace

int main(int argc, char** argv) {
    Tutorial tut(argc, argv,
                 {"19 The precision lab: where LayerNorm breaks in float32, float16 and bfloat16",
                  "P10.1, P10.2, P10.3, P10.4, P10.5", "docs/tutorials/19-precision-lab.md", "about 2 s",
                  "row lengths 64 to 32768 with 5 rows per point, issue 40302's 1024 rows, dgamma up to 2^20 rows "
                  "(about 30 s)",
                  "19_precision_lab_collapse.csv/.png (relative error against mu/sigma, one-pass and two-pass, "
                  "with the predicted lines), 19_precision_lab_dgamma.csv/.png (dgamma's error against the rows)"});
    const bool full = tut.full();

    // ---- 1 ----
    tut.section("P10.1", "five variance algorithms: where each collapses, against kappa = sqrt(1 + (mu/sigma)^2)");
    lab::CollapseConfig cfg;
    if (full) {
        cfg.lengths = {64, 256, 1024, 4096, 16384, 32768};
        cfg.rows_per_point = 5;
    }
    const lab::CollapseStudy s = lab::collapse_study(cfg);
    tut.step(fmt::format("rows x = mu + sigma z, mu^2 + sigma^2 = 1, mu/sigma = 1 .. 1e7 ({} points a decade)",
                         cfg.points_per_decade));
    tut.say("stored in each format, reduced in an accumulator (acc) of that format, float32 or float64;");
    tut.say(fmt::format("error: the median over {} rows of |var - var64| / var64, var64 = the float64 two-pass", cfg.rows_per_point));
    tut.say("variance of the same stored values; the 'storage' rows compare that with the float64 data's");
    tut.say("variance instead (what storing alone costs). Each cell: the first mu/sigma where the error");
    tut.say("is >= 1 (the variance is gone); '-': none before 1e7 or before the stored row has no spread");
    tut.say("left. Predicted: kappa^2 u = 1 for one-pass, kappa u = 1 for two-pass and the storage.");
    std::vector<std::vector<std::string>> t{{"storage", "acc", "algorithm", "predicted"}};
    for (std::size_t n : s.lengths) t[0].push_back(fmt::format("n={}", n));
    for (const auto& r : s.rows) {
        t.push_back({r.storage, r.algorithm == "storage" ? "-" : r.accumulator, r.algorithm, point(r.predicted)});
        for (double c : r.collapse) t.back().push_back(point(c));
    }
    tut.show(table(t));

    tut.step("the prediction of issue 28: one-pass collapses at mu/sigma ~ 4e3, ~45, ~16");
    tut.say("(float32, float16, bfloat16: kappa^2 u = 1 with the accumulator's u)");
    std::vector<std::vector<std::string>> p{{"format", "u", "predicted", "measured n=" + std::to_string(s.lengths.front()),
                                             "n=" + std::to_string(s.lengths.back()), "measured / predicted"}};
    double worst_factor = 1;
    std::string measured_text, predicted_text;
    for (const auto& [name, u] : std::vector<std::pair<std::string, double>>{{"float32", 0x1p-24}, {"float16", 0x1p-11},
                                                                               {"bfloat16", 0x1p-8}}) {
        const lab::CollapseRow& r = find_row(s, name, name, "one-pass");
        const double predicted = lab::predicted_one_pass_collapse(u);
        const double factor = r.collapse.front() / predicted;
        worst_factor = std::max(worst_factor, std::max(factor, 1 / factor));
        p.push_back({name, sci(u, 1), point(predicted), point(r.collapse.front()), point(r.collapse.back()), num(factor, 2)});
        measured_text += (measured_text.empty() ? "" : ", ") + point(r.collapse.front());
        predicted_text += (predicted_text.empty() ? "" : ", ") + point(predicted);
    }
    tut.show(table(p));
    tut.say("longer rows collapse earlier: the running sums add their own error, ~sqrt(n) u for");
    tut.say("random roundings (n u at worst), on top of kappa^2 u.");
    if (full) plot_collapse(tut, s, 2);
    else plot_collapse(tut, s, 1);
    tut.conclude(fmt::format("{} for rows of {}: one-pass collapses at mu/sigma {}", worst_factor <= 4 ? "holds" : "only roughly",
                             s.lengths.front(), measured_text));
    tut.say(fmt::format("   (predicted {}: within a factor {}); with a float32 or float64 accumulator", predicted_text,
                        num(worst_factor, 1)));
    tut.say("   two-pass, Welford, shifted and pairwise keep the variance until the storage loses the data");

    // ---- 2 ----
    tut.section("P10.2", "PyTorch issues 40302 and 51102, with their own inputs, in float32");
    const lab::Issue40302 i40302 = lab::issue_40302(full ? 1024 : 16);
    tut.step(fmt::format("issue 40302: randn({}, {}) * 0.01 + 100 in float32 (the issue: 1024 rows)", i40302.rows, i40302.cols));
    tut.say(fmt::format("true variances (float64, of the float32 values): {} .. {}", sci(i40302.true_var_min, 3),
                        sci(i40302.true_var_max, 3)));
    std::vector<std::vector<std::string>> a{{"algorithm", "accumulator", "rows with variance 0", "max relative error"}};
    for (const auto& r : i40302.algorithms)
        a.push_back({r.algorithm, r.accumulator, fmt::format("{} of {}", r.zero_rows, i40302.rows), error_text(r.max_rel_err)});
    tut.show(table(a));
    tut.say("(variances clamped at 0, as the kernels do: a negative one would make rstd NaN)");
    const auto& one_pass_40302 = i40302.algorithms.front();
    double stable_worst = 0;  // two-pass, Welford, shifted, pairwise in float32
    for (std::size_t a = 2; a < i40302.algorithms.size(); ++a) stable_worst = std::max(stable_worst, i40302.algorithms[a].max_rel_err);
    tut.conclude(fmt::format("{}: the float32 one-pass variance is exactly 0 in {} of {} rows;",
                             one_pass_40302.zero_rows > 0 ? "reproduced" : "NOT reproduced", one_pass_40302.zero_rows,
                             i40302.rows));
    tut.say(fmt::format("   two-pass, Welford, shifted and pairwise in float32 stay within {} of the variance",
                        sci(stable_worst, 1)));

    const std::vector<lab::Issue51102Row> i51102 = lab::issue_51102(1000);
    tut.step("issue 51102: LayerNorm(4, eps 1e-5, no affine) of randn(5, 4) + 2000 in float32");
    tut.say("the variance of each output row should be var / (var + eps) ~ 1 (the issue saw up to 48426)");
    std::vector<std::vector<std::string>> b{
        {"row", "var (float64)", "one-pass var", "out var one-pass", "out var two-pass", "out var xgrad"}};
    double worst_one_pass = 1, worst_two_pass = 0, worst_xgrad = 0;
    std::size_t zero_rows = 0;
    for (std::size_t r = 0; r < i51102.size(); ++r) {
        const auto& row = i51102[r];
        if (r < 5)
            b.push_back({std::to_string(r), num(row.true_var, 4), num(row.one_pass_var, 4), num(row.out_var_one_pass, 4),
                         num(row.out_var_two_pass, 6), num(row.out_var_xgrad, 6)});
        if (std::fabs(row.out_var_one_pass - 1) > std::fabs(worst_one_pass - 1)) worst_one_pass = row.out_var_one_pass;
        const double expected = row.true_var / (row.true_var + 1e-5);  // what LayerNorm's output variance is
        worst_two_pass = std::max(worst_two_pass, std::fabs(row.out_var_two_pass - expected));
        worst_xgrad = std::max(worst_xgrad, std::fabs(row.out_var_xgrad - expected));
        if (row.one_pass_var == 0) ++zero_rows;
    }
    tut.show(table(b));
    tut.say(fmt::format("over {} such rows (200 draws of the issue's (5, 4)): the one-pass variance is 0 in {},", i51102.size(),
                        zero_rows));
    tut.say(fmt::format("where the output variance becomes var / eps; the worst output variance: {}", num(worst_one_pass, 1)));
    tut.conclude(fmt::format("{}: one-pass output variance up to {}; against var / (var + eps),",
                             worst_one_pass > 1000 ? "reproduced" : "NOT reproduced", num(worst_one_pass, 0)));
    tut.say(fmt::format("   two-pass float32 stays within {}, xgrad's layer_norm (float64) within {}", sci(worst_two_pass, 1),
                        sci(worst_xgrad, 1)));

    tut.step("the same failure in float64: randn(8, 768) + 1e9 (kappa^2 u = 1e18 2^-53 ~ 111)");
    const lab::Float64Collapse f64 = lab::float64_collapse(1e9, 8);
    tut.say("LayerNorm(768, eps 1e-5): the output row variance farthest from 1");
    tut.show(table({{"one-pass float64", "xgrad reference kernel", "xgrad fast kernel"},
                    {num(f64.worst_one_pass, 4), num(f64.worst_reference, 6), num(f64.worst_fast, 6)}}));
    tut.conclude(fmt::format("{}: one-pass float64 gives {}; xgrad's kernels (corrected two-pass,",
                             f64.worst_one_pass > 2 ? "reproduced in float64" : "NOT reproduced", num(f64.worst_one_pass, 0)));
    tut.say("   nn/reference/mean_var.hpp, nn/fast/kernel_primitives.hpp) keep 1; a kernel gone back to");
    tut.say("   one-pass fails tests/layer_norm/test_layer_norm_precision.cpp");

    // ---- 3 ----
    tut.section("P10.3", "eps in float16: 1e-12 (BERT), 1e-5 (PyTorch), 1e-3 (Keras), inside or outside the root");
    const std::vector<lab::EpsRow> eps_rows = lab::eps_study();
    tut.step("LayerNorm of rows of 768 in pure float16 (statistics and eps in float16, two-pass)");
    tut.say(fmt::format("eps 1e-12 stored in float16 is {}; rstd = 1/sqrt(var + eps) or 1/(sqrt(var) + eps)",
                        num(lab::as_double(lab::store<lab::Float16>(1e-12)), 1)));
    tut.say("each cell: 'k bad' when k of the 768 outputs are NaN or inf, else the max |y - y64|");
    tut.say("(y64: the same LayerNorm in float64 on the same stored row, same eps and placement);");
    tut.say("last column: float32 statistics and eps 1e-12 inside, the output rounded to float16");
    std::vector<std::vector<std::string>> e{{"sigma"}};
    for (const auto& c : eps_rows.front().cells) e[0].push_back(fmt::format("{} {}", sci(c.eps, 0), c.inside ? "in" : "out"));
    e[0].push_back("f32 stats 1e-12");
    std::size_t constant_row_nan = 0;
    double largest_bad_sigma = 0;
    bool safe = true, outside_overflow = false;
    for (const auto& r : eps_rows) {
        e.push_back({r.sigma == 0 ? "0 (zeros)" : sci(r.sigma, 0)});
        for (const auto& c : r.cells)
            e.back().push_back(c.nonfinite ? fmt::format("{} bad", c.nonfinite) : c.max_err == 0 ? "0" : sci(c.max_err, 0));
        e.back().push_back(r.nonfinite_f32_stats ? fmt::format("{} bad", r.nonfinite_f32_stats) : "ok");
        if (r.sigma == 0) constant_row_nan = r.cells.front().nonfinite;
        if (r.sigma > 0 && r.cells.front().nonfinite > 0) largest_bad_sigma = std::max(largest_bad_sigma, r.sigma);
        safe = safe && r.cells[2].nonfinite == 0 && r.cells[4].nonfinite == 0 && r.nonfinite_f32_stats == 0;
        outside_overflow = outside_overflow || r.cells[3].nonfinite > 0;
    }
    tut.show(table(e));
    tut.conclude(fmt::format("{}: 1e-12 is 0 in float16, and the zero row gives {} bad outputs of 768,",
                             constant_row_nan == 768 ? "reproduced (issue 41527)" : "NOT reproduced", constant_row_nan));
    tut.say(fmt::format("   as do rows whose variance underflows (sigma <= {}); eps 1e-5 outside the root {}",
                        sci(largest_bad_sigma, 0), outside_overflow ? "fails too" : "does not fail"));
    tut.say(fmt::format("   (1/1e-5 > 65504); 1e-5 or 1e-3 inside, or float32 statistics: {}",
                        safe ? "every output finite" : "NOT all finite"));

    // ---- 4 ----
    tut.section("P10.4", "RMSNorm in bfloat16: cast back before or after multiplying by the weight");
    const lab::CastOrder co = lab::rms_norm_cast_order();
    tut.step(fmt::format("x (64, 768), w (768) in bfloat16, statistics in float32, eps 1e-6; {} outputs", co.elements));
    tut.say("before (Llama): w * bf16(x rstd) in bfloat16; after (Gemma): bf16(x rstd w) from float32");
    tut.show(table({{"", "max rel err vs float64", "mean rel err"},
                    {"before", sci(co.max_rel_err_before, 2), sci(co.mean_rel_err_before, 2)},
                    {"after", sci(co.max_rel_err_after, 2), sci(co.mean_rel_err_after, 2)}}));
    tut.say(fmt::format("the two orders differ in {} % of the outputs, by at most {} bfloat16 ulp",
                        num(100 * co.fraction_differ, 1), num(co.max_diff_ulps, 0)));
    // P10.4 holds when any output of the two orders differs.
    tut.conclude(fmt::format("{}: 2 roundings (before), 1 (after): max error {} vs {} (u 3.9e-03)",
                             co.fraction_differ > 0 ? "holds, they differ" : "not shown, NO difference",
                             sci(co.max_rel_err_before, 1), sci(co.max_rel_err_after, 1)));

    // ---- 5 ----
    tut.section("P10.5", "dgamma = sum over rows of g xhat: the accumulator decides its error");
    std::vector<std::size_t> counts;
    for (std::size_t rows = 256; rows <= (full ? (std::size_t{1} << 20) : (std::size_t{1} << 14)); rows *= 4) counts.push_back(rows);
    const std::vector<lab::DgammaRow> dg = lab::dgamma_study(counts);
    tut.step("16 columns, g = 0.5 xhat + noise (bfloat16 values), summed row after row");
    tut.say("max relative error over the columns against the exact sum");
    std::vector<std::vector<std::string>> d{{"rows", "float16", "bfloat16", "float32", "float64"}};
    for (const auto& r : dg)
        d.push_back({std::to_string(r.rows), error_text(r.err_f16), error_text(r.err_bf16), error_text(r.err_f32),
                     error_text(r.err_f64)});
    tut.show(table(d));
    plot_dgamma(tut, dg);
    const auto& last = dg.back();
    // P10.5 holds when both half-precision accumulators end 100 times or more worse than float32,
    // whose error stays below 1e-3: the accumulator's dtype, not the bfloat16 storage, decides.
    const bool half_fails = !(last.err_f16 < 100 * last.err_f32) && !(last.err_bf16 < 100 * last.err_f32);
    tut.conclude(fmt::format("{} at {} rows: float16 {}, bfloat16 {}, float32 {}, float64 {}:",
                             half_fails && last.err_f32 < 1e-3 ? "holds" : "not shown", last.rows,
                             error_text(last.err_f16), error_text(last.err_bf16), error_text(last.err_f32),
                             error_text(last.err_f64)));
    tut.say(fmt::format("   a half-precision running sum stalls once its spacing passes the terms{}; weight",
                        std::isinf(last.err_f16) ? " (float16 overflows 65504)" : ""));
    tut.say("   gradients summed over many rows need a float32 accumulator at least");
    return 0;
}

namespace tutorial_values::precision_lab {

namespace {

// The float64 two-pass variance (the lab's reference).
double two_pass(const double* x, std::size_t n) {
    double sum = 0;
    for (std::size_t i = 0; i < n; ++i) sum += x[i];
    const double mean = sum / static_cast<double>(n);
    double sq = 0;
    for (std::size_t i = 0; i < n; ++i) sq += (x[i] - mean) * (x[i] - mean);
    return sq / static_cast<double>(n);
}

// |v - ref| / ref; NaN when the reference has no spread (nothing left to measure); inf when v is not finite.
double rel_error(double v, double ref) {
    if (ref == 0) return std::numeric_limits<double>::quiet_NaN();
    if (!std::isfinite(v)) return std::numeric_limits<double>::infinity();
    return std::fabs(v - ref) / ref;
}

template <class S, class A>
void describe_accumulator(std::vector<CollapseRow>& rows) {
    for (VarianceAlgorithm a : kVarianceAlgorithms) {
        const double u = Format<A>::unit_roundoff;
        const double predicted = a == VarianceAlgorithm::one_pass   ? predicted_one_pass_collapse(u)
                                 : a == VarianceAlgorithm::two_pass ? predicted_two_pass_collapse(u)
                                                                    : 0.0;
        rows.push_back({Format<S>::name, Format<A>::name, algorithm_name(a), predicted, {}, {}});
    }
}

template <class S, class A>
void measure_accumulator(const std::vector<S>& xs, std::size_t n, double ref, std::vector<double>& out) {
    for (VarianceAlgorithm a : kVarianceAlgorithms) out.push_back(rel_error(variance<A>(a, xs.data(), n), ref));
}

// The rows of one storage format: the storage row, then each accumulator at least as wide.
template <class S>
void describe_storage(std::vector<CollapseRow>& rows) {
    rows.push_back({Format<S>::name, Format<S>::name, "storage", predicted_two_pass_collapse(Format<S>::unit_roundoff), {}, {}});
    describe_accumulator<S, S>(rows);
    if constexpr (!std::is_same_v<S, float> && !std::is_same_v<S, double>) describe_accumulator<S, float>(rows);
    if constexpr (!std::is_same_v<S, double>) describe_accumulator<S, double>(rows);
}

// Appends the errors of x[0..n) stored in S, in the order describe_storage<S> lists the rows.
template <class S>
void measure_storage(const std::vector<double>& x, std::size_t n, std::vector<double>& out) {
    std::vector<S> xs(n);
    std::vector<double> back(n);
    for (std::size_t i = 0; i < n; ++i) {
        xs[i] = store<S>(x[i]);
        back[i] = as_double(xs[i]);
    }
    const double ref = two_pass(back.data(), n), truth = two_pass(x.data(), n);
    out.push_back(std::fabs(ref - truth) / truth);
    measure_accumulator<S, S>(xs, n, ref, out);
    if constexpr (!std::is_same_v<S, float> && !std::is_same_v<S, double>) measure_accumulator<S, float>(xs, n, ref, out);
    if constexpr (!std::is_same_v<S, double>) measure_accumulator<S, double>(xs, n, ref, out);
}

// The median of a point's rows; NaN when any row has no spread left.
double median(std::vector<double> v) {
    for (double e : v)
        if (std::isnan(e)) return e;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

double predicted_one_pass_collapse(double u) { return std::sqrt(1 / u - 1); }
double predicted_two_pass_collapse(double u) { return std::sqrt(1 / (u * u) - 1); }

CollapseStudy collapse_study(const CollapseConfig& cfg) {
    CollapseStudy s;
    s.lengths = cfg.lengths;
    for (int k = 0; k <= 7 * cfg.points_per_decade; ++k) s.ratios.push_back(std::pow(10.0, k / static_cast<double>(cfg.points_per_decade)));
    describe_storage<double>(s.rows);
    describe_storage<float>(s.rows);
    describe_storage<Float16>(s.rows);
    describe_storage<BFloat16>(s.rows);
    const std::size_t L = s.lengths.size(), P = s.ratios.size(), max_length = *std::max_element(s.lengths.begin(), s.lengths.end());
    // samples[length][point][row] = the errors of every CollapseRow, in order
    std::vector<std::vector<std::vector<std::vector<double>>>> samples(L, std::vector<std::vector<std::vector<double>>>(P));
    xg::Generator gen(cfg.seed);
    std::vector<double> x(max_length);
    for (std::size_t k = 0; k < P; ++k) {
        const double sigma = 1 / std::sqrt(1 + s.ratios[k] * s.ratios[k]), mu = s.ratios[k] * sigma;
        for (std::size_t row = 0; row < cfg.rows_per_point; ++row) {
            for (double& v : x) v = mu + sigma * gen.normal();
            for (std::size_t l = 0; l < L; ++l) {  // the rows of each length are prefixes of one draw
                std::vector<double> errors;
                measure_storage<double>(x, s.lengths[l], errors);
                measure_storage<float>(x, s.lengths[l], errors);
                measure_storage<Float16>(x, s.lengths[l], errors);
                measure_storage<BFloat16>(x, s.lengths[l], errors);
                samples[l][k].push_back(std::move(errors));
            }
        }
    }
    for (std::size_t i = 0; i < s.rows.size(); ++i) {
        CollapseRow& r = s.rows[i];
        r.error.assign(L, std::vector<double>(P));
        r.collapse.assign(L, 0.0);
        for (std::size_t l = 0; l < L; ++l) {
            for (std::size_t k = 0; k < P; ++k) {
                std::vector<double> per_row;
                for (const auto& errors : samples[l][k]) per_row.push_back(errors[i]);
                r.error[l][k] = median(per_row);
            }
            for (std::size_t k = 0; k < P && !std::isnan(r.error[l][k]); ++k) {
                if (r.error[l][k] >= 1) {
                    r.collapse[l] = s.ratios[k];
                    break;
                }
            }
        }
    }
    return s;
}

Issue40302 issue_40302(std::size_t rows) {
    Issue40302 out;
    out.rows = rows;
    out.cols = 32768;
    struct Algorithm {
        const char* name;
        const char* accumulator;
        double (*variance)(const float*, std::size_t);
    };
    const std::vector<Algorithm> algorithms{
        {"one-pass", "float32", [](const float* x, std::size_t n) { return as_double(variance_one_pass<float>(x, n)); }},
        {"one-pass", "float64", [](const float* x, std::size_t n) { return variance_one_pass<double>(x, n); }},
        {"two-pass", "float32", [](const float* x, std::size_t n) { return as_double(variance_two_pass<float>(x, n)); }},
        {"Welford", "float32", [](const float* x, std::size_t n) { return as_double(variance_welford<float>(x, n)); }},
        {"shifted", "float32", [](const float* x, std::size_t n) { return as_double(variance_shifted<float>(x, n)); }},
        {"pairwise", "float32", [](const float* x, std::size_t n) { return as_double(variance_pairwise<float>(x, n)); }},
    };
    for (const auto& a : algorithms) out.algorithms.push_back({a.name, a.accumulator, 0, 0.0});
    xg::Generator gen(40302);
    std::vector<float> x(out.cols);
    std::vector<double> back(out.cols);
    out.true_var_min = std::numeric_limits<double>::infinity();
    for (std::size_t r = 0; r < rows; ++r) {
        for (std::size_t j = 0; j < out.cols; ++j) {
            x[j] = static_cast<float>(gen.normal()) * 0.01f + 100.0f;  // float32 arithmetic, as torch does
            back[j] = x[j];
        }
        const double truth = two_pass(back.data(), out.cols);
        out.true_var_min = std::min(out.true_var_min, truth);
        out.true_var_max = std::max(out.true_var_max, truth);
        for (std::size_t a = 0; a < algorithms.size(); ++a) {
            const double v = std::max(0.0, algorithms[a].variance(x.data(), out.cols));
            if (v == 0) ++out.algorithms[a].zero_rows;
            out.algorithms[a].max_rel_err = std::max(out.algorithms[a].max_rel_err, rel_error(v, truth));
        }
    }
    return out;
}

std::vector<double> row_variances(const std::vector<double>& y, std::size_t rows, std::size_t cols) {
    std::vector<double> v;
    for (std::size_t r = 0; r < rows; ++r) v.push_back(two_pass(y.data() + r * cols, cols));
    return v;
}

std::vector<Issue51102Row> issue_51102(std::size_t rows) {
    const std::size_t D = 4;
    const float eps = 1e-5f;
    xg::Generator gen(51102);
    xg::Array x64 = xg::Array::from_shape({rows, D});
    std::vector<float> x(rows * D);
    for (std::size_t i = 0; i < rows * D; ++i) {
        x[i] = static_cast<float>(gen.normal()) + 2000.0f;
        x64.data()[i] = x[i];
    }
    const xg::Array y_xgrad = xg::nn::functional::layer_norm(xg::Tensor(x64), {D}).value();
    std::vector<Issue51102Row> out;
    for (std::size_t r = 0; r < rows; ++r) {
        const float* xr = x.data() + r * D;
        Issue51102Row row;
        std::vector<double> back(xr, xr + D);
        row.true_var = two_pass(back.data(), D);
        // LayerNorm in float32 with a given mean and variance; the output row's variance in float64.
        auto out_var = [&](float mean, float var) {
            const float rstd = 1.0f / std::sqrt(var + eps);
            std::vector<double> y(D);
            for (std::size_t j = 0; j < D; ++j) y[j] = (xr[j] - mean) * rstd;
            return two_pass(y.data(), D);
        };
        float sum = 0;
        for (std::size_t j = 0; j < D; ++j) sum += xr[j];
        const float mean = sum / static_cast<float>(D);
        const float one_pass = std::max(0.0f, variance_one_pass<float>(xr, D));
        row.one_pass_var = one_pass;
        row.out_var_one_pass = out_var(mean, one_pass);
        row.out_var_two_pass = out_var(mean, variance_two_pass<float>(xr, D));
        std::vector<double> yx(y_xgrad.data() + r * D, y_xgrad.data() + (r + 1) * D);
        row.out_var_xgrad = two_pass(yx.data(), D);
        out.push_back(row);
    }
    return out;
}

Float64Collapse float64_collapse(double offset, std::size_t rows) {
    const std::size_t D = 768;
    const double eps = 1e-5;
    xg::Generator gen(1983);
    xg::Array x = xg::Array::from_shape({rows, D});
    for (double& v : x) v = offset + gen.normal();
    Float64Collapse out;
    out.offset = offset;
    auto farthest_from_one = [](const std::vector<double>& vars) {
        double worst = 1;
        for (double v : vars)
            if (std::fabs(v - 1) > std::fabs(worst - 1)) worst = v;
        return worst;
    };
    std::vector<double> y(rows * D);
    for (std::size_t r = 0; r < rows; ++r) {
        const double* xr = x.data() + r * D;
        const double mean = [&] {
            double s = 0;
            for (std::size_t j = 0; j < D; ++j) s += xr[j];
            return s / D;
        }();
        const double rstd = 1 / std::sqrt(std::max(0.0, variance_one_pass<double>(xr, D)) + eps);
        for (std::size_t j = 0; j < D; ++j) y[r * D + j] = (xr[j] - mean) * rstd;
    }
    out.worst_one_pass = farthest_from_one(row_variances(y, rows, D));
    for (xg::KernelTier tier : {xg::KernelTier::reference, xg::KernelTier::fast}) {
        xg::KernelTierGuard guard(tier);
        const xg::Array yl = xg::nn::functional::layer_norm(xg::Tensor(x), {D}, xg::Tensor(), xg::Tensor(), eps).value();
        const double worst = farthest_from_one(row_variances(std::vector<double>(yl.begin(), yl.end()), rows, D));
        (tier == xg::KernelTier::reference ? out.worst_reference : out.worst_fast) = worst;
    }
    return out;
}

namespace {

// LayerNorm of one row with statistics in A, eps stored in A; outputs as doubles (not yet rounded).
template <class A>
std::vector<double> layer_norm_in(const std::vector<Float16>& x, double eps, bool eps_inside) {
    const std::size_t n = x.size();
    const A count = store<A>(static_cast<double>(n));
    A sum = store<A>(0);
    for (const Float16& v : x) sum += convert<A>(v);
    const A mean = sum / count;
    A sq = store<A>(0);
    for (const Float16& v : x) {
        const A d = convert<A>(v) - mean;
        sq += d * d;
    }
    using std::sqrt;
    const A var = sq / count, e = store<A>(eps), one = store<A>(1);
    const A rstd = eps_inside ? one / sqrt(var + e) : one / (sqrt(var) + e);
    std::vector<double> y;
    for (const Float16& v : x) y.push_back(as_double((convert<A>(v) - mean) * rstd));
    return y;
}

}  // namespace

std::vector<double> layer_norm_float16(const std::vector<Float16>& x, double eps, bool eps_inside) {
    return layer_norm_in<Float16>(x, eps, eps_inside);
}

std::vector<double> layer_norm_float16_f32_stats(const std::vector<Float16>& x, double eps, bool eps_inside) {
    std::vector<double> y = layer_norm_in<float>(x, eps, eps_inside);
    for (double& v : y) v = as_double(store<Float16>(v));
    return y;
}

std::vector<EpsRow> eps_study() {
    const std::size_t D = 768;
    xg::Generator gen(41527);
    std::vector<EpsRow> out;
    for (double sigma : {0.0, 1.0, 1e-1, 1e-2, 1e-3, 1e-4, 1e-5}) {
        std::vector<Float16> x(D);
        for (Float16& v : x) v = store<Float16>(sigma * gen.normal());
        EpsRow row;
        row.sigma = sigma;
        for (double eps : {1e-12, 1e-5, 1e-3}) {
            for (bool inside : {true, false}) {
                EpsCell c;
                c.eps = eps;
                c.inside = inside;
                const std::vector<double> y = layer_norm_float16(x, eps, inside), y64 = layer_norm_in<double>(x, eps, inside);
                for (std::size_t j = 0; j < D; ++j) {
                    if (!std::isfinite(y[j])) ++c.nonfinite;
                    else if (std::isfinite(y64[j])) c.max_err = std::max(c.max_err, std::fabs(y[j] - y64[j]));
                }
                row.cells.push_back(c);
            }
        }
        for (double v : layer_norm_float16_f32_stats(x, 1e-12, true))
            if (!std::isfinite(v)) ++row.nonfinite_f32_stats;
        out.push_back(row);
    }
    return out;
}

CastOrder rms_norm_cast_order() {
    const std::size_t R = 64, D = 768;
    const float eps = 1e-6f;
    xg::Generator gen(29402);
    std::vector<BFloat16> w(D), x(R * D);
    for (BFloat16& v : w) v = store<BFloat16>(1 + 0.5 * gen.normal());
    for (BFloat16& v : x) v = store<BFloat16>(gen.normal());
    CastOrder out;
    out.elements = R * D;
    std::size_t differ = 0;
    double sum_before = 0, sum_after = 0;
    for (std::size_t r = 0; r < R; ++r) {
        const BFloat16* xr = x.data() + r * D;
        float ms = 0;
        double ms64 = 0;
        for (std::size_t j = 0; j < D; ++j) {
            ms += xr[j].v * xr[j].v;
            ms64 += as_double(xr[j]) * as_double(xr[j]);
        }
        const float rstd = 1.0f / std::sqrt(ms / static_cast<float>(D) + eps);
        const double rstd64 = 1 / std::sqrt(ms64 / static_cast<double>(D) + static_cast<double>(eps));
        for (std::size_t j = 0; j < D; ++j) {
            const float h = xr[j].v * rstd;
            const double before = as_double(w[j] * BFloat16::rounded(h));  // Llama: weight * hidden.to(bf16)
            const double after = as_double(BFloat16::rounded(h * w[j].v));  // Gemma: (hidden * weight).to(bf16)
            const double exact = as_double(xr[j]) * rstd64 * as_double(w[j]);
            if (before != after) {
                ++differ;
                int e = 0;
                std::frexp(after, &e);
                out.max_diff_ulps = std::max(out.max_diff_ulps, std::fabs(before - after) / std::ldexp(1.0, e - 8));
            }
            if (exact == 0) continue;
            const double eb = std::fabs(before - exact) / std::fabs(exact), ea = std::fabs(after - exact) / std::fabs(exact);
            out.max_rel_err_before = std::max(out.max_rel_err_before, eb);
            out.max_rel_err_after = std::max(out.max_rel_err_after, ea);
            sum_before += eb;
            sum_after += ea;
        }
    }
    out.fraction_differ = static_cast<double>(differ) / static_cast<double>(out.elements);
    out.mean_rel_err_before = sum_before / static_cast<double>(out.elements);
    out.mean_rel_err_after = sum_after / static_cast<double>(out.elements);
    return out;
}

std::vector<DgammaRow> dgamma_study(const std::vector<std::size_t>& row_counts) {
    const std::size_t D = 16;
    xg::Generator gen(66707);
    std::vector<Float16> s16(D, store<Float16>(0));
    std::vector<BFloat16> sb16(D, store<BFloat16>(0));
    std::vector<float> s32(D, 0.0f);
    std::vector<double> s64(D, 0.0);
    std::vector<long double> exact(D, 0.0L);  // products of two bfloat16 values are exact in double; 64-bit sums
    std::vector<DgammaRow> out;
    std::size_t next = 0;
    for (std::size_t r = 1; next < row_counts.size(); ++r) {
        for (std::size_t j = 0; j < D; ++j) {
            const double z = gen.normal();
            const BFloat16 xhat = store<BFloat16>(z), g = store<BFloat16>(0.5 * z + gen.normal());
            s16[j] += convert<Float16>(g) * convert<Float16>(xhat);
            sb16[j] += g * xhat;
            s32[j] += g.v * xhat.v;
            s64[j] += as_double(g) * as_double(xhat);
            exact[j] += static_cast<long double>(as_double(g) * as_double(xhat));
        }
        if (r != row_counts[next]) continue;
        DgammaRow row;
        row.rows = r;
        auto worst = [&](auto sum_of) {
            double e = 0;
            for (std::size_t j = 0; j < D; ++j) {
                const double ref = static_cast<double>(exact[j]), v = sum_of(j);
                e = std::max(e, std::isfinite(v) ? std::fabs(v - ref) / std::fabs(ref) : std::numeric_limits<double>::infinity());
            }
            return e;
        };
        row.err_f16 = worst([&](std::size_t j) { return as_double(s16[j]); });
        row.err_bf16 = worst([&](std::size_t j) { return as_double(sb16[j]); });
        row.err_f32 = worst([&](std::size_t j) { return static_cast<double>(s32[j]); });
        row.err_f64 = worst([&](std::size_t j) { return s64[j]; });
        out.push_back(row);
        ++next;
    }
    return out;
}

}  // namespace tutorial_values::precision_lab
