// GELU's fast kernels (nn/fast/gelu.cpp: glibc's vector erfc, exp, tanh) against its reference
// kernels (nn/reference/gelu.cpp: std::erfc, std::exp, std::tanh), both approximations, at 1 and 3
// threads, over an odd number of elements above the threads' split (core/fast/parallel.hpp).
//
// Tolerances, from glibc's documented bounds: the vector functions are within 4 ulp, the scalar
// erfc within 5, exp within 1 and tanh within 2 (glibc's libm-test-ulps), and an ulp of v is at
// most 2 u |v| (u = 2^-53). Both tiers compute the arguments (-x / sqrt 2, -x^2 / 2, u(x)) with the
// same operations, so only the functions' own errors and the roundings after them differ.
//   exact forward  y = x Phi: erfc differs by <= 9 ulp = 18 u, two roundings each: 20 u |y|.
//   exact backward dx = g (Phi + x phi): the fast Phi = y / x carries erfc's 8 u and two roundings,
//                  the reference Phi erfc's 10 u; x phi carries 8 u + 2 (fast), 2 u + 2 (reference);
//                  the sum and the product by g round once each: 24 u |g| (|Phi| + |x phi|).
//   tanh forward   y = 0.5 x (1 + t): t differs by <= 6 ulp = 12 u |t|, 1 + t and the product
//                  round in each: 16 u 0.5 |x| (|t| + |1 + t|).
//   tanh backward  0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 k x^2): 1 - t^2 differs by <= 24 u t^2
//                  plus its rounding; 32 u |g| (0.5 (|t| + |1 + t|) + 0.5 |x| c (1 + 3 k x^2) (t^2 + |1 - t^2|)).
#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

#include "core/engine/random.hpp"
#include "nn/functional/functional.hpp"
#include "tests/support/tiers_support.hpp"

namespace xg_test_gelu_tiers {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using xg::Array;
using xg::Tensor;
using xg::test::kUnitRoundoff;

constexpr long double kSqrt2OverPi = 0.797884560802865355879892119868763737L;
constexpr long double kKappa = 0.044715L;

// x uniform in [-10, 10] with the points where GELU's arithmetic changes branch, 40 003 values
// (odd, and above the 32 K elements from which the fast kernels share the work between threads).
Array inputs() {
    xg::Generator gen(26);
    Array x = Array::from_shape({40003});
    for (double& v : x) v = gen.uniform(-10.0, 10.0);
    const double special[] = {0.0, -0.0, 1e-18, -1e-18, 1e-17, -0.7517916, 0.7517916, -8.3, 8.3, -10.0, 10.0, 1e-300};
    for (std::size_t k = 0; k < std::size(special); ++k) x.data()[k * 101] = special[k];
    return x;
}

struct Run {
    Array y, dx;
};

// In float32 (`dtype`) x and g are the float32 roundings the caller passes; y and dx come back widened.
Run run(const xg::test::TierRun& tier, const Array& x, const Array& g, F::GeluApproximate approximate,
        xg::Dtype dtype = xg::kFloat64) {
    return xg::test::on(tier, [&] {
        Tensor xl(x, dtype, true);
        const Tensor y = F::gelu(xl, approximate);
        y.backward(Tensor(g, dtype));
        return Run{y.value(), xl.grad().value()};
    });
}

// The float64 bounds above, entry by entry.
struct Bounds {
    Array y_tol, dx_tol;
};

Bounds bounds(const Array& x, const Array& g, bool exact) {
    Bounds b{Array::from_shape(x.shape()), Array::from_shape(x.shape())};
    for (std::size_t k = 0; k < x.size(); ++k) {
        const long double xk = x.data()[k], gk = std::fabs(g.data()[k]);
        if (exact) {
            const long double Phi = 0.5L * std::erfc(-xk / std::sqrt(2.0L)), phi = std::exp(-0.5L * xk * xk) / std::sqrt(2.0L * M_PIl);
            b.y_tol.data()[k] = static_cast<double>(20 * kUnitRoundoff * std::fabs(xk * Phi));
            b.dx_tol.data()[k] = static_cast<double>(24 * kUnitRoundoff * gk * (std::fabs(Phi) + std::fabs(xk * phi)));
        } else {
            const long double t = std::tanh(kSqrt2OverPi * (xk + kKappa * xk * xk * xk));
            const long double first = 0.5L * (std::fabs(t) + std::fabs(1 + t));
            const long double second = 0.5L * std::fabs(xk) * kSqrt2OverPi * (1 + 3 * kKappa * xk * xk) * (t * t + std::fabs(1 - t * t));
            b.y_tol.data()[k] = static_cast<double>(16 * kUnitRoundoff * 0.5L * std::fabs(xk) * (std::fabs(t) + std::fabs(1 + t)));
            b.dx_tol.data()[k] = static_cast<double>(32 * kUnitRoundoff * gk * (first + second));
        }
    }
    return b;
}

TEST_CASE("tiers: gelu fast kernels match the reference within glibc's ulp bounds (exact and tanh, 1 and 3 threads)", "[tiers][gelu]") {
    const Array x = inputs();
    xg::Generator gen(27);
    const Array g = xg::randn({x.size()}, gen).value();
    for (const F::GeluApproximate approximate : {F::GeluApproximate::none, F::GeluApproximate::tanh}) {
        const bool exact = approximate == F::GeluApproximate::none;
        const Run reference = run({xg::KernelTier::reference, 1}, x, g, approximate);
        const Bounds b = bounds(x, g, exact);
        for (const xg::test::TierRun& tier : xg::test::fast_runs()) {
            const Run fast = run(tier, x, g, approximate);
            const std::string what = std::string(exact ? "gelu exact, " : "gelu tanh, ") + tier.name();
            xg::test::require_within(fast.y, reference.y, b.y_tol, what + ": y");
            xg::test::require_within(fast.dx, reference.dx, b.dx_tol, what + ": dx");
        }
    }
}

// float32 (issue 28): the fast kernels compute in float (nn/fast/gelu.cpp: glibc's vector erfcf,
// expf, tanhf), the reference in double, rounded once. The bound counts the fast kernel's roundings
// (u = 2^-24 relative, each float operation; the constants' float roundings another u each) and
// the functions' error: glibc documents its vector functions within 4 ulp ("Errors in Math
// Functions"; x86_64 libm-test-ulps lists 1 ulp for erfc/exp_vlen8_avx2 float, 3 and 1 for the
// SSE vlen4 ones), 4 ulp <= 8 u relative; tests/gelu/test_gelu_simd_math.cpp measures them
// (2.8 ulp at most, expf's SSE version). The argument's rounding moves f(v) by |f'(v) v| times it: erfc by 2 kappa(z) u
// relative, kappa(z) = 2 |z| exp(-z^2) / (sqrt(pi) erfc(z)) (~ 2 z^2 at the left tail: 100 at x = -10),
// exp by x^2 / 2 u, tanh by (1 - t^2) |v| 7 u. The reference is the double value (b.*_tol) rounded
// once: one u more of each result.
//   exact y   z = fl(-x c), 2 u; erfcf 8 u; 0.5 exact; x times it 1 u:   (9 + 2 kappa) u |y|, + u: (10 + 2 kappa) u |y|
//   exact dx  Phi = y / x: y's error + 1 u; x phi: x c 2 u, -x^2 / 2 1 u (x^2 / 2 u in exp), expf 8 u,
//             the product 1 u; the sum, the product by g and the reference 3 u:
//             u |g| ((10 + 2 kappa) |Phi| + (11 + x^2 / 2) |x phi| + 3 |Phi + x phi|)
//   tanh      v = c (x + k x^3): k x x x 4 u, the sum 1 u, c 2 u: 7 u |v|, so
//             dt = 8 u |t| + 7 u |v| (1 - t^2); y = (0.5 x)(1 + t): 0.5 |x| (dt + 3 u |1 + t|)
//             dx: first 0.5 (dt + u |1 + t|); second 0.5 |x| c s (2 |t| dt + u t^2 + 10 u |1 - t^2|)
//             (s = 1 + 3 k x^2 carries 5 u, the three products and c 4 u); the sum, g and the reference 3 u.
// Where a result underflows (erfc(z) below 2^-126 for x < about -13, exp(-x^2 / 2) for |x| > 13.2)
// rounding is absolute: a subnormal result of a float operation is off by at most 2^-150, glibc's
// erfcf and expf by 4 ulp = 4 * 2^-149 (measured 0.95 and 0.5); so y gains (2.5 |x| + 1) 2^-149
// (erfc's 4 halved, the halving, the product, the reference), dx (|g| (4.5 + 1.6 |x|) + 1) 2^-149
// (Phi = y / x: 3.5; exp's 4 times |x| / sqrt(2 pi); x phi and the sum 1; the product by g and
// the reference), the tanh form (the 8 float operations after tanhf) 4 (1 + |g|) 2^-149.
// A factor (1 + 2^-20) on u covers the products of the first-order terms.
// The inputs add 4000 values with x in [-30, -10] and [10, 20] to the float64 test's: the tails.
Array float32_inputs() {
    Array x = inputs();
    xg::Generator gen(29);
    for (std::size_t k = 20000; k < 24000; ++k) x.data()[k] = k % 4 == 0 ? gen.uniform(10.0, 20.0) : gen.uniform(-30.0, -10.0);
    const double tails[] = {-12.9, -13.0, -13.2, -14.0, -14.5, -15.0, -20.0, -30.0, 13.0, 20.0};
    for (std::size_t k = 0; k < std::size(tails); ++k) x.data()[24000 + k] = tails[k];
    return xg::to_float64_array(xg::to_float32_array(x));
}

struct Float32Bounds {
    Array y_tol, dx_tol;
};

Float32Bounds float32_bounds(const Array& x, const Array& g, bool exact, const Bounds& b64) {
    const long double u = std::ldexp(1.0L, -24) * (1 + std::ldexp(1.0L, -20)), tiny = std::ldexp(1.0L, -149);
    const long double sqrt_pi = std::sqrt(static_cast<long double>(M_PIl));
    Float32Bounds b{Array::from_shape(x.shape()), Array::from_shape(x.shape())};
    for (std::size_t k = 0; k < x.size(); ++k) {
        const long double xk = x.data()[k], gk = std::fabs(g.data()[k]);
        long double y_tol = 0, dx_tol = 0;
        if (exact) {
            const long double z = -xk / std::sqrt(2.0L), erfc_z = std::erfc(z);
            const long double kappa = erfc_z > 0 ? 2 * std::fabs(z) * std::exp(-z * z) / (sqrt_pi * erfc_z) : 0;
            const long double Phi = 0.5L * erfc_z, x_phi = xk * std::exp(-0.5L * xk * xk) / std::sqrt(2.0L * M_PIl);
            y_tol = (10 + 2 * kappa) * u * std::fabs(xk * Phi) + (2.5L * std::fabs(xk) + 1) * tiny;
            dx_tol = u * gk * ((10 + 2 * kappa) * std::fabs(Phi) + (11 + 0.5L * xk * xk) * std::fabs(x_phi) + 3 * std::fabs(Phi + x_phi)) +
                     (gk * (4.5L + 1.6L * std::fabs(xk)) + 1) * tiny;
        } else {
            const long double v = kSqrt2OverPi * (xk + kKappa * xk * xk * xk), t = std::tanh(v);
            const long double dt = 8 * u * std::fabs(t) + 7 * u * std::fabs(v) * (1 - t * t);
            const long double s = 1 + 3 * kKappa * xk * xk;
            const long double first = 0.5L * (1 + t), second = 0.5L * xk * (1 - t * t) * kSqrt2OverPi * s;
            y_tol = 0.5L * std::fabs(xk) * (dt + 3 * u * std::fabs(1 + t)) + 4 * tiny;
            dx_tol = gk * (0.5L * (dt + u * std::fabs(1 + t)) +
                           0.5L * std::fabs(xk) * kSqrt2OverPi * s * (2 * std::fabs(t) * dt + u * t * t + 10 * u * std::fabs(1 - t * t)) +
                           3 * u * std::fabs(first + second)) +
                     4 * (1 + gk) * tiny;
        }
        b.y_tol.data()[k] = static_cast<double>(y_tol) + b64.y_tol.data()[k];
        b.dx_tol.data()[k] = static_cast<double>(dx_tol) + b64.dx_tol.data()[k];
    }
    return b;
}

TEST_CASE("tiers: float32 gelu fast kernels (float arithmetic) match the float32 reference within their rounding bound "
          "(exact and tanh, 1 and 3 threads)",
          "[tiers][gelu][float32]") {
    const Array x = float32_inputs();
    xg::Generator gen(28);
    const Array g = xg::to_float64_array(xg::to_float32_array(xg::randn({x.size()}, gen).value()));
    for (const F::GeluApproximate approximate : {F::GeluApproximate::none, F::GeluApproximate::tanh}) {
        const bool exact = approximate == F::GeluApproximate::none;
        const Run reference = run({xg::KernelTier::reference, 1}, x, g, approximate, xg::kFloat32);
        const Float32Bounds b = float32_bounds(x, g, exact, bounds(x, g, exact));
        for (const xg::test::TierRun& tier : xg::test::fast_runs()) {
            const Run fast = run(tier, x, g, approximate, xg::kFloat32);
            const std::string what = std::string(exact ? "float32 gelu exact, " : "float32 gelu tanh, ") + tier.name();
            xg::test::require_within(fast.y, reference.y, b.y_tol, what + ": y");
            xg::test::require_within(fast.dx, reference.dx, b.dx_tol, what + ": dx");
        }
    }
}

}  // namespace xg_test_gelu_tiers
