// Tutorial 04: how to compute the variance inside LayerNorm - one-pass E[x^2] - E[x]^2 vs
// two-pass vs Welford on rows with a large mean, and why the library's LayerNorm is robust.
// Guide: docs/tutorials/04-variance.md. Run with --step to pause after each step.
#include "tutorials/04_variance/variance.hpp"

#include <algorithm>
#include <cmath>
#include <memory>

#include <fmt/format.h>

#include "core/ops/ops.hpp"
#include "core/engine/random.hpp"
#include "nn/modules/norm_layers.hpp"
#include "tutorials/common/tutorial.hpp"

using namespace xg::tutorial;
namespace tv = tutorial_values;

int main(int argc, char** argv) {
    Tutorial tut(argc, argv,
                 {"04 Computing the variance", "(supports A0.1, A2.1, A3.1: the sigma^2 step)", "docs/tutorials/04-variance.md",
                  "under 1 s", "", ""});

    tut.section("04.1", "x = offset + [2, 4, 6, 8]: the true variance is 5 for every offset");
    std::vector<std::vector<std::string>> rows{
        {"offset", "E[x^2]-E[x]^2", "two-pass", "Welford", "xg::var", "LN[0] via one-pass", "nn::LayerNorm[0]"}};
    for (const tv::OffsetRow& r : tv::offset_rows()) {
        rows.push_back({sci(r.offset, 0), num(r.one_pass, 4), num(r.two_pass, 4), num(r.welford, 4), num(r.library_var, 4),
                        num(r.ln_first_one_pass, 5), num(r.ln_first_library, 5)});
    }
    tut.step("the three algorithms and the library, and LayerNorm's first output (exact -1.34164)");
    tut.show(table(rows));
    tut.say("E[x^2] - E[x]^2 subtracts two numbers of size offset^2: at 1e8 the squares are ~1e16,");
    tut.say("where doubles are spaced 2 apart, so the variance 5 is lost (6 at 1e8, 0 at 1e9, where");
    tut.say("LN[0] becomes -3/sqrt(eps)); a result below -eps would make sqrt(var + eps) NaN.");

    tut.section("04.2", "rows of randn(16, 768) + offset: worst relative error of the variance");
    std::vector<std::vector<std::string>> wide{
        {"offset", "E[x^2]-E[x]^2", "two-pass", "Welford", "xg::var", "nn::LayerNorm max abs err"}};
    for (const tv::WideRows& w : tv::wide_rows()) {
        wide.push_back({sci(w.offset, 0), sci(w.err_one_pass), sci(w.err_two_pass), sci(w.err_welford),
                        sci(w.err_library_var), sci(w.ln_max_abs_err)});
    }
    tut.step("against a long-double two-pass reference");
    tut.show(table(wide));
    tut.say("the remaining ~6e-9 at offset 1e8 is the spacing of doubles near 1e8 (1.5e-8): the mean itself");
    tut.say("cannot be stored more precisely, whatever the algorithm.");
    tut.conclude("the library never uses E[x^2] - E[x]^2: xg::var is two-pass, and the fused LayerNorm uses a");
    tut.say("   corrected two-pass (it also sums the deviations, whose total is the first mean's rounding");
    tut.say("   error), so a constant row gives exactly beta and a row with mean 1e8 keeps its digits.");
    return 0;
}

namespace tutorial_values {

using namespace xg;

double variance_one_pass(const double* x, std::size_t n) {
    double s = 0, s2 = 0;
    for (std::size_t i = 0; i < n; ++i) {
        s += x[i];
        s2 += x[i] * x[i];
    }
    const double m = s / static_cast<double>(n);
    return s2 / static_cast<double>(n) - m * m;  // two huge, nearly equal numbers subtracted
}

double variance_two_pass(const double* x, std::size_t n) {
    double s = 0;
    for (std::size_t i = 0; i < n; ++i) s += x[i];
    const double m = s / static_cast<double>(n);
    double d2 = 0;
    for (std::size_t i = 0; i < n; ++i) d2 += (x[i] - m) * (x[i] - m);
    return d2 / static_cast<double>(n);
}

double variance_welford(const double* x, std::size_t n) {
    double mean = 0, m2 = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const double delta = x[i] - mean;
        mean += delta / static_cast<double>(i + 1);
        m2 += delta * (x[i] - mean);
    }
    return m2 / static_cast<double>(n);
}

std::vector<OffsetRow> offset_rows() {
    std::vector<OffsetRow> rows;
    auto ln = std::make_shared<nn::LayerNorm>(4);
    for (double offset : {0.0, 1e4, 1e6, 1e7, 1e8, 1e9}) {
        OffsetRow r;
        r.offset = offset;
        const Array x = Array{2.0, 4.0, 6.0, 8.0} + offset;
        r.one_pass = variance_one_pass(x.data(), 4);
        r.two_pass = variance_two_pass(x.data(), 4);
        r.welford = variance_welford(x.data(), 4);
        r.library_var = var(Tensor(x), {0}, /*unbiased=*/false).item();
        const double mean = (x(0) + x(1) + x(2) + x(3)) / 4.0;
        r.ln_first_one_pass = (x(0) - mean) / std::sqrt(r.one_pass + 1e-5);  // NaN if one_pass < -1e-5
        r.ln_first_library = ln->forward(Tensor(x)).value()(0);
        rows.push_back(r);
    }
    return rows;
}

std::vector<WideRows> wide_rows() {
    std::vector<WideRows> out;
    Generator gen(4);
    const std::size_t R = 16, H = 768;
    const Array base = randn({R, H}, gen).value();
    auto ln = std::make_shared<nn::LayerNorm>(H);
    for (double offset : {0.0, 1e4, 1e6, 1e8}) {
        WideRows w;
        w.offset = offset;
        const Array x = base + offset;
        const Array lib_var = var(Tensor(x), {-1}, false).value();
        const Array lib_ln = ln->forward(Tensor(x)).value();
        for (std::size_t r = 0; r < R; ++r) {
            const double* row = x.data() + r * H;
            long double s = 0, d2 = 0;  // reference: two-pass in extended precision
            for (std::size_t j = 0; j < H; ++j) s += row[j];
            const long double m = s / H;
            for (std::size_t j = 0; j < H; ++j) d2 += (row[j] - m) * (row[j] - m);
            const long double ref = d2 / H;
            auto rel = [&](double v) { return static_cast<double>(std::fabs((v - ref) / ref)); };
            w.err_one_pass = std::max(w.err_one_pass, rel(variance_one_pass(row, H)));
            w.err_two_pass = std::max(w.err_two_pass, rel(variance_two_pass(row, H)));
            w.err_welford = std::max(w.err_welford, rel(variance_welford(row, H)));
            w.err_library_var = std::max(w.err_library_var, rel(lib_var(r)));
            const long double rstd = 1.0L / std::sqrt(ref + 1e-5L);
            for (std::size_t j = 0; j < H; ++j) {
                const double exact = static_cast<double>((row[j] - m) * rstd);
                w.ln_max_abs_err = std::max(w.ln_max_abs_err, std::fabs(lib_ln.data()[r * H + j] - exact));
            }
        }
        out.push_back(w);
    }
    return out;
}

}  // namespace tutorial_values
