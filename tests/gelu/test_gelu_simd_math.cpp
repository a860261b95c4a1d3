// The vectorised erfc, exp and tanh of nn/fast/simd_math.hpp, and GELU built on them, against long
// double (11 more bits on x86-64) over wide ranges, the tails and the special values.
//
// The bound is glibc's documented one for its vector math functions, 4 ulp; the test prints what
// it measured beside the scalar std:: function's. GELU's bounds add the roundings of the
// arithmetic around the function, and compare with a reference that takes the same rounded
// argument (x / sqrt 2, -x^2 / 2, u): the tails' ~x^2-ulp sensitivity to that one rounding is
// the function's conditioning, not the kernel's error (test_fused_invariants checks it there).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "nn/functional/functional.hpp"
#include "nn/fast/kernel_primitives.hpp"
#include "nn/fast/simd_math.hpp"

namespace xg_test_gelu_simd_math {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using xg::Array;
using xg::Tensor;

namespace {

constexpr double kDocumentedUlps = 4.0;  // glibc manual, "Errors in Math Functions": libmvec < 4 ulp
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kUnit = 0x1p-53;        // half an ulp of 1: the relative size of one rounding

// The loops as the library writes them (a `#pragma omp simd` loop, with an AVX2 clone), so that
// the vector versions are what runs here too.
XG_KERNEL_CLONES void erfc_loop(const double* x, double* y, std::size_t n) {
#pragma omp simd
    for (std::size_t i = 0; i < n; ++i) y[i] = xg::nn::detail::simd_erfc(x[i]);
}
XG_KERNEL_CLONES void exp_loop(const double* x, double* y, std::size_t n) {
#pragma omp simd
    for (std::size_t i = 0; i < n; ++i) y[i] = xg::nn::detail::simd_exp(x[i]);
}
XG_KERNEL_CLONES void tanh_loop(const double* x, double* y, std::size_t n) {
#pragma omp simd
    for (std::size_t i = 0; i < n; ++i) y[i] = xg::nn::detail::simd_tanh(x[i]);
}

// The float versions (erfcf, expf, tanhf: 4 floats per SSE call, 8 per AVX2 call).
XG_KERNEL_CLONES void erfcf_loop(const float* x, float* y, std::size_t n) {
#pragma omp simd
    for (std::size_t i = 0; i < n; ++i) y[i] = xg::nn::detail::simd_erfc(x[i]);
}
XG_KERNEL_CLONES void expf_loop(const float* x, float* y, std::size_t n) {
#pragma omp simd
    for (std::size_t i = 0; i < n; ++i) y[i] = xg::nn::detail::simd_exp(x[i]);
}
XG_KERNEL_CLONES void tanhf_loop(const float* x, float* y, std::size_t n) {
#pragma omp simd
    for (std::size_t i = 0; i < n; ++i) y[i] = xg::nn::detail::simd_tanh(x[i]);
}

// |got - exact| in ulps of the double nearest `exact` (for a normal result).
double ulps(double got, long double exact) {
    const double nearest = static_cast<double>(exact);
    const double ulp = std::nextafter(std::fabs(nearest), kInf) - std::fabs(nearest);
    return static_cast<double>(std::fabs(static_cast<long double>(got) - exact) / ulp);
}

bool is_normal_result(long double exact) { return std::fabs(exact) >= std::numeric_limits<double>::min(); }

// Arguments over [lo, hi]: a uniform grid, random ones, and random ones near the ends.
std::vector<double> arguments(double lo, double hi, unsigned seed) {
    std::vector<double> x;
    for (int k = 0; k <= 100000; ++k) x.push_back(lo + (hi - lo) * k / 100000.0);
    std::mt19937_64 engine(seed);
    std::uniform_real_distribution<double> all(lo, hi), ends(0.0, 1.0);
    for (int k = 0; k < 200000; ++k) x.push_back(all(engine));
    for (int k = 0; k < 20000; ++k) x.push_back(k % 2 ? lo + ends(engine) : hi - ends(engine));
    return x;
}

struct Worst {
    double vector = 0.0, scalar = 0.0;
};

template <class Loop, class Scalar, class Exact>
Worst worst_ulps(Loop loop, Scalar scalar, Exact exact, const std::vector<double>& x) {
    std::vector<double> y(x.size());
    loop(x.data(), y.data(), x.size());
    Worst w;
    for (std::size_t i = 0; i < x.size(); ++i) {
        const long double e = exact(x[i]);
        if (!is_normal_result(e)) continue;
        w.vector = std::max(w.vector, ulps(y[i], e));
        w.scalar = std::max(w.scalar, ulps(scalar(x[i]), e));
    }
    return w;
}

struct Range {
    double lo, hi;
    unsigned seed;
};

// The vector loop against fn on long double, over a wide range and the core one; fn on double
// (glibc's scalar function) is measured alongside for comparison.
template <class Loop, class Fn>
void check_function(const char* name, Loop loop, Fn fn, Range wide, Range core) {
    const auto exact = [&fn](double v) { return fn(static_cast<long double>(v)); };
    const auto scalar = [&fn](double v) { return fn(v); };
    const Worst w = worst_ulps(loop, scalar, exact, arguments(wide.lo, wide.hi, wide.seed));
    const Worst c = worst_ulps(loop, scalar, exact, arguments(core.lo, core.hi, core.seed));
    fmt::print("simd {}: worst {:.2f} ulp on [{}, {}], {:.2f} on [{}, {}] (std::{} {:.2f}, {:.2f})\n", name, w.vector, wide.lo,
               wide.hi, c.vector, core.lo, core.hi, name, w.scalar, c.scalar);
    INFO(name);
    CHECK(w.vector <= kDocumentedUlps);
    CHECK(c.vector <= kDocumentedUlps);
}

template <class Loop>
double one(Loop loop, double x) {
    double y = 0.0;
    loop(&x, &y, 1);
    return y;
}

}  // namespace

TEST_CASE("the vectorised erfc, exp and tanh are within glibc's 4 ulp over wide ranges and keep their special values", "[simd_math]") {
    check_function("erfc", erfc_loop, [](auto v) { return std::erfc(v); }, {-8.0, 27.5, 1}, {-2.0, 2.0, 2});
    check_function("exp", exp_loop, [](auto v) { return std::exp(v); }, {-745.0, 709.7, 3}, {-1.0, 1.0, 4});
    check_function("tanh", tanh_loop, [](auto v) { return std::tanh(v); }, {-25.0, 25.0, 5}, {-0.7, 0.7, 6});

    // The tails: erfc down to where it underflows (27.2), exp down to subnormal results.
    CHECK(one(erfc_loop, 26.0) > 0.0);
    CHECK(one(erfc_loop, 27.3) == 0.0);
    CHECK(one(erfc_loop, 40.0) == 0.0);
    CHECK(one(erfc_loop, -40.0) == 2.0);
    CHECK(one(exp_loop, -740.0) > 0.0);  // subnormal, not flushed
    CHECK(one(exp_loop, -746.0) == 0.0);
    CHECK(one(exp_loop, 710.0) == kInf);
    // Special values.
    const double nan = std::numeric_limits<double>::quiet_NaN();
    CHECK(one(erfc_loop, 0.0) == 1.0);
    CHECK(one(erfc_loop, -0.0) == 1.0);
    CHECK(one(erfc_loop, kInf) == 0.0);
    CHECK(one(erfc_loop, -kInf) == 2.0);
    CHECK(std::isnan(one(erfc_loop, nan)));
    CHECK(one(exp_loop, 0.0) == 1.0);
    CHECK(one(exp_loop, -kInf) == 0.0);
    CHECK(one(exp_loop, kInf) == kInf);
    CHECK(std::isnan(one(exp_loop, nan)));
    CHECK(one(tanh_loop, 0.0) == 0.0);
    CHECK(std::signbit(one(tanh_loop, -0.0)));
    CHECK(one(tanh_loop, kInf) == 1.0);
    CHECK(one(tanh_loop, -kInf) == -1.0);
    CHECK(std::isnan(one(tanh_loop, nan)));
}

// The float versions against the double function (within 1e-15 relative here, so exact at float's
// scale), at every 64th float of each range (about 35 million arguments per function): within
// glibc's 4 ulp for a normal result, within 4 * 2^-149 (4 ulp of the subnormal range) for a
// subnormal one; the largest seen is printed (AVX2: erfcf 1.57, expf 2.57, tanhf 1.02 ulp; 2026-12-03).
template <class Loop, class Fn>
void check_float_function(const char* name, Loop loop, Fn fn, float lo, float hi) {
    std::vector<float> x;
    for (std::uint32_t bits = 0; bits < 0x7f800000u; bits += 64) {
        float v;
        std::memcpy(&v, &bits, sizeof v);
        if (v <= hi) x.push_back(v);
        if (-v >= lo && v != 0.0f) x.push_back(-v);
    }
    std::vector<float> y(x.size());
    loop(x.data(), y.data(), x.size());
    double worst = 0.0, worst_subnormal = 0.0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        const double exact = fn(static_cast<double>(x[i]));
        if (std::fabs(exact) >= std::numeric_limits<float>::min()) {
            const float nearest = std::fabs(static_cast<float>(exact));
            const double ulp = static_cast<double>(std::nextafter(nearest, std::numeric_limits<float>::infinity()) - nearest);
            worst = std::max(worst, std::fabs(y[i] - exact) / ulp);
        } else {
            worst_subnormal = std::max(worst_subnormal, std::fabs(y[i] - exact) / 0x1p-149);
        }
    }
    fmt::print("simd {}f: worst {:.2f} ulp on [{}, {}] ({} arguments), {:.2f} x 2^-149 where the result is subnormal\n", name, worst,
               lo, hi, x.size(), worst_subnormal);
    INFO(name);
    CHECK(worst <= kDocumentedUlps);
    CHECK(worst_subnormal <= kDocumentedUlps);
}

TEST_CASE("the vectorised erfcf, expf and tanhf are within glibc's 4 ulp of the double functions", "[simd_math][float32]") {
    check_float_function("erfc", erfcf_loop, [](double v) { return std::erfc(v); }, -11.0f, 11.0f);
    check_float_function("exp", expf_loop, [](double v) { return std::exp(v); }, -104.0f, 88.7f);
    check_float_function("tanh", tanhf_loop, [](double v) { return std::tanh(v); }, -20.0f, 20.0f);
    float y = 0.0f;
    const float big = 12.0f;
    erfcf_loop(&big, &y, 1);
    CHECK(y == 0.0f);  // erfc(12) = 1.4e-64: below float's subnormals
}

TEST_CASE("gelu's vectorised kernels stay within a few roundings of long double over [-40, 40]", "[simd_math][fused]") {
    const std::vector<double> args = arguments(-40.0, 40.0, 7);
    const std::size_t n = args.size();
    Array values = Array::from_shape({n});
    std::copy(args.begin(), args.end(), values.begin());
    const Array ones = xt::ones<double>({n});
    constexpr double kInvSqrt2 = 0.70710678118654752440, kInvSqrt2Pi = 0.39894228040143267794;
    constexpr double kSqrt2OverPi = 0.79788456080286535588, kKappa = 0.044715;

    Tensor x(values, true);
    Tensor y = F::gelu(x);
    y.backward(Tensor(ones));
    Tensor xt_(values, true);
    Tensor yt = F::gelu(xt_, F::GeluApproximate::tanh);
    yt.backward(Tensor(ones));

    double worst_y = 0.0, worst_dy = 0.0, worst_yt = 0.0, worst_dyt = 0.0, worst_tail = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
        const double xd = args[i];
        const long double v = xd;
        // exact: y = x Phi(x), Phi = erfc(z) / 2 with z = -x / sqrt 2 rounded as the kernel rounds it
        const long double cdf = 0.5L * std::erfc(static_cast<long double>(-xd * kInvSqrt2));
        const long double y_exact = v * cdf;
        // Where Phi or phi is below the normal range (x < -37.5) it keeps fewer bits: absolute there.
        const long double exp_term = std::exp(static_cast<long double>(-0.5 * xd * xd));
        const bool normal_terms = is_normal_result(cdf) && is_normal_result(exp_term);
        if (is_normal_result(cdf)) {
            worst_y = std::max(worst_y, ulps(y.value()(i), y_exact));
        } else {
            worst_tail = std::max(worst_tail, static_cast<double>(std::fabs(y.value()(i) - y_exact)));
        }
        // dy/dx = Phi + x phi: a sum, so its error is measured against the size of its terms
        const long double pdf_term = v * kInvSqrt2Pi * exp_term;
        const long double dy_exact = cdf + pdf_term;
        const long double dy_scale = std::fabs(cdf) + std::fabs(pdf_term);
        if (normal_terms) {
            worst_dy = std::max(worst_dy, static_cast<double>(std::fabs(x.grad_value()(i) - dy_exact) / (kUnit * dy_scale)));
        } else {
            worst_tail = std::max(worst_tail, static_cast<double>(std::fabs(x.grad_value()(i) - dy_exact)));
        }
        // tanh: y = x (1 + t) / 2, t = tanh(u), u as the kernel rounds it; 1 + t cancels for x << 0
        const double u = kSqrt2OverPi * (xd + kKappa * xd * xd * xd);
        const long double t = std::tanh(static_cast<long double>(u));
        const long double yt_exact = 0.5L * v * (1 + t);
        const long double yt_scale = 0.5L * std::fabs(v) * (1 + std::fabs(t));
        if (yt_scale > 0) {
            worst_yt = std::max(worst_yt, static_cast<double>(std::fabs(yt.value()(i) - yt_exact) / (kUnit * yt_scale)));
        }
        const long double slope = kSqrt2OverPi * (1 + 3 * kKappa * v * v);
        const long double dyt_exact = 0.5L * (1 + t) + 0.5L * v * (1 - t * t) * slope;
        const long double dyt_scale = 0.5L * (1 + std::fabs(t)) + 0.5L * std::fabs(v) * (1 + t * t) * slope;
        worst_dyt = std::max(worst_dyt, static_cast<double>(std::fabs(xt_.grad_value()(i) - dyt_exact) / (kUnit * dyt_scale)));
    }
    fmt::print("gelu: y within {:.2f} ulp, dy/dx within {:.2f} roundings of its terms, |error| {:.1e} where Phi or phi "
               "underflows; tanh form: {:.2f}, {:.2f} roundings\n", worst_y, worst_dy, worst_tail, worst_yt, worst_dyt);
    // exact y: erfc's 4 ulp and one rounding of the product (the halving is exact)
    CHECK(worst_y <= kDocumentedUlps + 0.5);
    // In units of one rounding (half an ulp): Phi = y / x carries y's error and one more rounding;
    // x phi carries exp's 4 ulp and three roundings; then the sum.
    CHECK(worst_dy <= 2 * (kDocumentedUlps + 1.0) + 4.0);
    // tanh form: tanh's 4 ulp (8 roundings of t), 1 + t, and the products
    CHECK(worst_yt <= 2 * kDocumentedUlps + 4.0);
    CHECK(worst_dyt <= 2 * kDocumentedUlps + 8.0);
    CHECK(worst_tail <= 1e-300);
}

}  // namespace xg_test_gelu_simd_math
