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

// The float64 bounds above, entry by entry (the first two), and the scales |y| and
// |g| (|Phi| + |x phi|) (or its tanh form) that bound |y| and |dx|, for the float32 bounds.
struct Bounds {
    Array y_tol, dx_tol, y_scale, dx_scale, phi_part;
};

Bounds bounds(const Array& x, const Array& g, bool exact) {
    Bounds b{Array::from_shape(x.shape()), Array::from_shape(x.shape()), Array::from_shape(x.shape()),
             Array::from_shape(x.shape()), Array::from_shape(x.shape())};
    for (std::size_t k = 0; k < x.size(); ++k) {
        const long double xk = x.data()[k], gk = std::fabs(g.data()[k]);
        if (exact) {
            const long double Phi = 0.5L * std::erfc(-xk / std::sqrt(2.0L)), phi = std::exp(-0.5L * xk * xk) / std::sqrt(2.0L * M_PIl);
            b.y_scale.data()[k] = static_cast<double>(std::fabs(xk * Phi));
            b.dx_scale.data()[k] = static_cast<double>(gk * (std::fabs(Phi) + std::fabs(xk * phi)));
            b.phi_part.data()[k] = static_cast<double>(gk * std::fabs(Phi));
            b.y_tol.data()[k] = static_cast<double>(20 * kUnitRoundoff * std::fabs(xk * Phi));
            b.dx_tol.data()[k] = static_cast<double>(24 * kUnitRoundoff * gk * (std::fabs(Phi) + std::fabs(xk * phi)));
        } else {
            const long double t = std::tanh(kSqrt2OverPi * (xk + kKappa * xk * xk * xk));
            const long double first = 0.5L * (std::fabs(t) + std::fabs(1 + t));
            const long double second = 0.5L * std::fabs(xk) * kSqrt2OverPi * (1 + 3 * kKappa * xk * xk) * (t * t + std::fabs(1 - t * t));
            b.y_scale.data()[k] = static_cast<double>(0.5L * std::fabs(xk) * (std::fabs(t) + std::fabs(1 + t)));
            b.dx_scale.data()[k] = static_cast<double>(gk * (first + second));
            b.phi_part.data()[k] = 0.0;
            b.y_tol.data()[k] = static_cast<double>(16 * kUnitRoundoff * b.y_scale.data()[k]);
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

// float32 storage (issue 28): both tiers compute in float64 as above and round each result to
// float32 once (u32 = 2^-24 relative), so the tiers differ by the float64 bound plus two float32
// roundings: y within y_tol + 2 u32 |y|. The fast exact backward reads Phi = y / x from the ROUNDED
// y (a relative u32 in Phi: u32 |g| |Phi| more), the reference recomputes Phi from x:
// dx within dx_tol + 2 u32 |dx| (+ u32 |g| |Phi| exact). A factor (1 + 2^-20) on the float32 terms
// covers the float64 error inside the values being rounded.
TEST_CASE("tiers: float32 gelu fast kernels match the float32 reference (exact and tanh, 1 and 3 threads)", "[tiers][gelu][float32]") {
    const Array x = xg::to_float64_array(xg::to_float32_array(inputs()));
    xg::Generator gen(28);
    const Array g = xg::to_float64_array(xg::to_float32_array(xg::randn({x.size()}, gen).value()));
    const double u32 = std::ldexp(1.0, -24) * (1.0 + std::ldexp(1.0, -20));
    for (const F::GeluApproximate approximate : {F::GeluApproximate::none, F::GeluApproximate::tanh}) {
        const bool exact = approximate == F::GeluApproximate::none;
        const Run reference = run({xg::KernelTier::reference, 1}, x, g, approximate, xg::kFloat32);
        const Bounds b = bounds(x, g, exact);
        const Array y_tol = b.y_tol + 2 * u32 * b.y_scale;
        const Array dx_tol = b.dx_tol + 2 * u32 * b.dx_scale + u32 * b.phi_part;
        for (const xg::test::TierRun& tier : xg::test::fast_runs()) {
            const Run fast = run(tier, x, g, approximate, xg::kFloat32);
            const std::string what = std::string(exact ? "float32 gelu exact, " : "float32 gelu tanh, ") + tier.name();
            xg::test::require_within(fast.y, reference.y, y_tol, what + ": y");
            xg::test::require_within(fast.dx, reference.dx, dx_tol, what + ": dx");
        }
    }
}

}  // namespace xg_test_gelu_tiers
