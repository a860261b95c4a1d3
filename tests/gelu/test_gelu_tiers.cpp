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

Run run(const xg::test::TierRun& tier, const Array& x, const Array& g, F::GeluApproximate approximate) {
    return xg::test::on(tier, [&] {
        Tensor xl(x, true);
        const Tensor y = F::gelu(xl, approximate);
        y.backward(Tensor(g));
        return Run{y.value(), xl.grad().value()};
    });
}

TEST_CASE("tiers: gelu fast kernels match the reference within glibc's ulp bounds (exact and tanh, 1 and 3 threads)", "[tiers][gelu]") {
    const Array x = inputs();
    xg::Generator gen(27);
    const Array g = xg::randn({x.size()}, gen).value();
    for (const F::GeluApproximate approximate : {F::GeluApproximate::none, F::GeluApproximate::tanh}) {
        const bool exact = approximate == F::GeluApproximate::none;
        const Run reference = run({xg::KernelTier::reference, 1}, x, g, approximate);
        Array y_tol = Array::from_shape(x.shape()), dx_tol = Array::from_shape(x.shape());
        for (std::size_t k = 0; k < x.size(); ++k) {
            const long double xk = x.data()[k], gk = std::fabs(g.data()[k]);
            if (exact) {
                const long double Phi = 0.5L * std::erfc(-xk / std::sqrt(2.0L)), phi = std::exp(-0.5L * xk * xk) / std::sqrt(2.0L * M_PIl);
                y_tol.data()[k] = static_cast<double>(20 * kUnitRoundoff * std::fabs(xk * Phi));
                dx_tol.data()[k] = static_cast<double>(24 * kUnitRoundoff * gk * (std::fabs(Phi) + std::fabs(xk * phi)));
            } else {
                const long double t = std::tanh(kSqrt2OverPi * (xk + kKappa * xk * xk * xk));
                const long double first = 0.5L * (std::fabs(t) + std::fabs(1 + t));
                const long double second = 0.5L * std::fabs(xk) * kSqrt2OverPi * (1 + 3 * kKappa * xk * xk) * (t * t + std::fabs(1 - t * t));
                y_tol.data()[k] = static_cast<double>(16 * kUnitRoundoff * 0.5L * std::fabs(xk) * (std::fabs(t) + std::fabs(1 + t)));
                dx_tol.data()[k] = static_cast<double>(32 * kUnitRoundoff * gk * (first + second));
            }
        }
        for (const xg::test::TierRun& tier : xg::test::fast_runs()) {
            const Run fast = run(tier, x, g, approximate);
            const std::string what = std::string(exact ? "gelu exact, " : "gelu tanh, ") + tier.name();
            xg::test::require_within(fast.y, reference.y, y_tol, what + ": y");
            xg::test::require_within(fast.dx, reference.dx, dx_tol, what + ": dx");
        }
    }
}

}  // namespace xg_test_gelu_tiers
