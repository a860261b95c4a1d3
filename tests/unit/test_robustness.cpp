// Numerical robustness on hard inputs, for what test_fused_invariants.cpp (fused LayerNorm at
// mean 1e6, constant rows, H = 1, tiny variances; fused GELU at 0, +-1e-3, +-10, +-30) and the
// +-1000 softmax/log_softmax goldens do not already cover: BatchNorm on the same hard inputs,
// the composed twins, RMSNorm on zero rows, cross-entropy at logits of +-1000, and no fast-math.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/ops/ops.hpp"
#include "core/engine/random.hpp"
#include "nn/nn.hpp"

namespace xg_test_robustness {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using xg::Array;
using xg::Shape;
using xg::Tensor;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// Output and input gradients of f(inputs) for upstream gradient `g`, on fresh leaf copies.
std::vector<Array> run(const Fn& f, const std::vector<Array>& inputs, const Array& g) {
    std::vector<Tensor> leaves;
    for (const Array& a : inputs) leaves.emplace_back(a, true);
    const Tensor y = f(leaves);
    y.backward(Tensor(g));
    std::vector<Array> out{y.value()};
    for (const Tensor& t : leaves) out.push_back(t.grad_value());
    return out;
}

bool all_finite(const std::vector<Array>& arrays) {
    for (const Array& a : arrays) {
        if (!std::all_of(a.begin(), a.end(), [](double v) { return std::isfinite(v); })) return false;
    }
    return true;
}

Array randn(const Shape& s) { return xg::randn(s).value(); }

// Exact (long double) batch-norm output for channel k of a (N, C) array, biased variance.
long double bn_exact(const Array& x, std::size_t n, std::size_t k, long double eps) {
    const std::size_t N = x.shape()[0];
    long double mean = 0, var = 0;
    for (std::size_t i = 0; i < N; ++i) mean += static_cast<long double>(x(i, k)) / N;
    for (std::size_t i = 0; i < N; ++i) var += (x(i, k) - mean) * (x(i, k) - mean) / N;
    return (x(n, k) - mean) / std::sqrt(var + eps);
}

}  // namespace

TEST_CASE("batch_norm at mean 1e6 and at tiny variances matches the exact result", "[robustness]") {
    xg::manual_seed(31);
    struct Case {
        const char* name;
        double scale, shift, eps, tolerance;
    };
    // Tolerances: at mean 1e6 one rounding of x is 1e6 * 2^-53 ~ 1e-10 of a unit-spread value.
    // At spread 1e-6 the inputs carry ~1e-10 relative precision of their spread (x ~ 1).
    for (const Case& c : {Case{"mean 1e6, unit spread", 1.0, 1e6, 1e-5, 1e-9},
                          Case{"spread 1e-6, eps 1e-8", 1e-6, 1.0, 1e-8, 1e-8},
                          Case{"spread 1e-6, eps 1e-5", 1e-6, 1.0, 1e-5, 1e-8}}) {
        const Array x = randn({16, 3}) * c.scale + c.shift;
        const Array g = randn({16, 3});
        const double eps = c.eps;
        for (bool composed : {false, true}) {
            const auto bn = composed ? F::batch_norm_composed : F::batch_norm;
            const auto r = run([&](auto& t) { return bn(t[0], Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, eps); },
                               {x}, g);
            double worst = 0, peak = 0;
            for (std::size_t n = 0; n < 16; ++n) {
                for (std::size_t k = 0; k < 3; ++k) {
                    const long double y = bn_exact(x, n, k, eps);
                    worst = std::max(worst, static_cast<double>(std::abs(r[0](n, k) - y)));
                    peak = std::max(peak, static_cast<double>(std::abs(y)));
                }
            }
            fmt::print("robustness: batch_norm{} {}: max |y - exact| / max |y| = {:.2e}\n", composed ? "_composed" : "",
                       c.name, worst / peak);
            INFO(c.name << (composed ? " (composed)" : " (fused)"));
            CHECK(worst <= c.tolerance * peak);
            CHECK(all_finite(r));
        }
    }
}

TEST_CASE("batch_norm with a single channel and with two samples per channel", "[robustness]") {
    xg::manual_seed(32);
    const Array x1 = randn({5, 1}), w = randn({1}), b = randn({1});
    const auto one = run([](auto& t) { return F::batch_norm(t[0], Tensor(), Tensor(), t[1], t[2], true); }, {x1, w, b},
                         randn({5, 1}));
    CHECK(all_finite(one));
    double s = 0;
    for (std::size_t n = 0; n < 5; ++n) s += one[1](n, 0);
    CHECK(std::abs(s) <= 1e-14 * (1 + std::abs(one[1](0, 0))));  // d/dx sums to zero per channel
    // N = 2: x_hat = +-1 / sqrt(1 + eps / var), whatever the values.
    const Array x2 = {{3.0, -7.0}, {5.0, 1e6}};
    const auto two = run([](auto& t) { return F::batch_norm(t[0], Tensor(), Tensor(), Tensor(), Tensor(), true); }, {x2},
                         randn({2, 2}));
    CHECK(two[0](0, 0) == Approx(-1.0 / std::sqrt(1.0 + 1e-5 / 1.0)).epsilon(1e-14));
    CHECK(two[0](1, 1) == Approx(1.0).epsilon(1e-14));
    CHECK(all_finite(two));
}

TEST_CASE("composed layer_norm on hard rows: mean 1e6, constant, H = 1, tiny variance", "[robustness]") {
    xg::manual_seed(33);
    const auto ln = [](double eps) {
        return [eps](auto& t) { return F::layer_norm_composed(t[0], {t[0].shape().back()}, t[1], t[2], eps); };
    };
    const Array w = randn({8}), b = randn({8});
    const Array big = randn({3, 8}) + 1e6;
    const auto r = run(ln(1e-5), {big, w, b}, randn({3, 8}));
    double worst = 0;
    for (std::size_t i = 0; i < 3; ++i) {
        long double mean = 0, var = 0;
        for (std::size_t j = 0; j < 8; ++j) mean += static_cast<long double>(big(i, j)) / 8;
        for (std::size_t j = 0; j < 8; ++j) var += (big(i, j) - mean) * (big(i, j) - mean) / 8;
        for (std::size_t j = 0; j < 8; ++j) {
            const long double y = (big(i, j) - mean) / std::sqrt(var + 1e-5L) * w(j) + b(j);
            worst = std::max(worst, static_cast<double>(std::abs(r[0](i, j) - y)));
        }
    }
    fmt::print("robustness: layer_norm_composed at mean 1e6: max |y - exact| = {:.2e}\n", worst);
    CHECK(worst <= 1e-9);
    CHECK(all_finite(r));
    for (double eps : {1e-5, 1e-8}) {
        // A constant row gives beta only up to the rounding of the composed mean (a few ulps of
        // the constant) amplified by 1 / sqrt(eps); the fused op is exact (test_fused_invariants).
        const double constant = 1e6 + 0.3;
        const auto c = run(ln(eps), {xg::full({2, 8}, constant).value(), w, b}, randn({2, 8}));
        const double bound = 4 * (std::nextafter(constant, 2e6) - constant) / std::sqrt(eps);
        for (std::size_t j = 0; j < 8; ++j) CHECK(std::abs(c[0](1, j) - b(j)) <= bound * std::abs(w(j)));
        CHECK(all_finite(c));
        const auto tiny = run(ln(eps), {randn({2, 8}) * 1e-6 + 1.0, w, b}, randn({2, 8}));
        CHECK(all_finite(tiny));
    }
    const Array w1 = randn({1}), b1 = randn({1});
    const auto h1 = run(ln(1e-5), {randn({4, 1}), w1, b1}, randn({4, 1}));
    for (std::size_t i = 0; i < 4; ++i) CHECK(h1[0](i, 0) == b1(0));
    CHECK(all_finite(h1));
}

TEST_CASE("rms_norm of all-zero rows is zero with finite gradients", "[robustness]") {
    for (bool composed : {false, true}) {
        const auto rms = composed ? F::rms_norm_composed : F::rms_norm;
        const auto r = run([&](auto& t) { return rms(t[0], {6}, t[1], 1e-6); }, {xt::zeros<double>({2, 6}), randn({6})},
                           randn({2, 6}));
        CHECK(std::all_of(r[0].begin(), r[0].end(), [](double v) { return v == 0.0; }));
        CHECK(all_finite(r));
    }
}

TEST_CASE("composed gelu is finite and agrees with the fused one at 0, +-1e-3, +-10, +-30", "[robustness]") {
    const Array x = {0.0, 1e-3, -1e-3, 10.0, -10.0, 30.0, -30.0};
    const Array g = xt::ones<double>({7});
    for (auto approx : {F::GeluApproximate::none, F::GeluApproximate::tanh}) {
        const auto fused = run([approx](auto& t) { return F::gelu(t[0], approx); }, {x}, g);
        const auto composed = run([approx](auto& t) { return F::gelu_composed(t[0], approx); }, {x}, g);
        CHECK(all_finite(fused));
        CHECK(all_finite(composed));
        for (std::size_t i = 0; i < 7; ++i) {
            INFO("x = " << x(i));
            // Relative: the ~x^2-ulp conditioning of test_fused_invariants. Absolute: the composed
            // 1 + erf(x / sqrt 2) (and 1 + tanh(...)) cancels for x << 0, leaving only ~1e-16
            // absolute accuracy of the factor, times |x| (PyTorch's formula has the same limit;
            // the fused op stays relatively exact down to -30, test_fused_invariants).
            const double tol = 1e-15 * (1.0 + x(i) * x(i)), margin = 1e-15 * (1.0 + std::abs(x(i)));
            CHECK(composed[0](i) == Approx(fused[0](i)).epsilon(tol).margin(margin));
            CHECK(composed[1](i) == Approx(fused[1](i)).epsilon(tol).margin(margin));
        }
    }
}

TEST_CASE("cross_entropy with logits of +-1000 is exact and has finite gradients", "[robustness]") {
    const Array logits = {{1000.0, -1000.0, 999.0}, {-1000.0, -1000.0, -999.0}, {1000.0, 1000.0, -1000.0}};
    const xg::IndexArray targets = {2, 1, 0};
    for (double ls : {0.0, 0.1}) {
        const auto r = run([&](auto& t) { return xg::nn::cross_entropy(t[0], targets, xg::nn::Reduction::none, ls); },
                           {logits}, xt::ones<double>({3}));
        CHECK(all_finite(r));
        for (std::size_t i = 0; i < 3; ++i) {
            long double m = -1e30L, s = 0, sum_logp = 0;
            for (std::size_t j = 0; j < 3; ++j) m = std::max(m, static_cast<long double>(logits(i, j)));
            for (std::size_t j = 0; j < 3; ++j) s += std::exp(logits(i, j) - m);
            const long double lse = m + std::log(s);
            for (std::size_t j = 0; j < 3; ++j) sum_logp += logits(i, j) - lse;
            const long double loss = -(1 - ls) * (logits(i, targets(i)) - lse) - ls / 3 * sum_logp;
            INFO("row " << i << " label_smoothing " << ls);
            // A few ulps of the loss (or of 1 when it is below 1).
            CHECK(std::abs(r[0](i) - static_cast<double>(loss)) <= 8e-16 * std::max(1.0L, std::abs(loss)));
            for (std::size_t j = 0; j < 3; ++j) {
                const long double p = std::exp(logits(i, j) - lse);
                const long double d = p - ls / 3 - (j == static_cast<std::size_t>(targets(i)) ? 1 - ls : 0);
                CHECK(std::abs(r[1](i, j) - static_cast<double>(d)) <= 4e-16);
            }
        }
    }
}

TEST_CASE("no fast-math anywhere: not in the build, not in this translation unit", "[robustness]") {
#ifdef __FAST_MATH__
    FAIL("compiled with -ffast-math");
#endif
    // NaN checks (anomaly mode, clip_grad_norm) rely on isnan/isfinite, which fast-math removes.
    volatile double zero = 0.0;
    CHECK(std::isnan(zero / zero));
    namespace fs = std::filesystem;
    const fs::path root = XGRAD_SOURCE_DIR;
    std::vector<std::string> offenders;
    std::size_t scanned = 0;
    for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
        const std::string name = it->path().filename().string();
        if (it->is_directory() && (name.rfind("build", 0) == 0 || name == ".git")) {
            it.disable_recursion_pending();
            continue;
        }
        const std::string ext = it->path().extension().string();
        if (!it->is_regular_file() || !(name == "CMakeLists.txt" || ext == ".cmake" || ext == ".sh" || name == "run")) continue;
        ++scanned;
        std::ifstream in(it->path());
        std::string line;
        for (int n = 1; std::getline(in, line); ++n) {
            const std::string code = line.substr(0, line.find('#'));  // comments may warn about it
            for (const char* flag : {"-ffast-math", "-Ofast", "-funsafe-math-optimizations"}) {
                if (code.find(flag) != std::string::npos) offenders.push_back(fmt::format("{}:{}", it->path().string(), n));
            }
        }
    }
    INFO("offending lines: " << fmt::format("{}", fmt::join(offenders, ", ")));
    CHECK(scanned >= 3);
    CHECK(offenders.empty());
}

}  // namespace xg_test_robustness
