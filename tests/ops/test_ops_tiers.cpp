// softmax's and log_softmax's fast kernels (core/fast/softmax.cpp) against the reference kernels
// (core/reference/softmax.cpp), along every axis of an odd-sized 3-D tensor (strided rows), with
// logits of +-1000 and -inf, at 1 and 3 threads, in float64 and float32.
//
// float64: tolerance 0. Both tiers do the same operations on the same values in the same order (the
// fast tier only hands whole rows to threads; C++17 builds do not contract into FMAs), so the bits
// agree, and any difference is a bug in one of them.
//
// float32: both tiers compute in double and round each result to float once, but the fast tier's
// exponentials are glibc's vector exp (within 4 ulp = 8 u, u = 2^-53; documented in the glibc
// manual, measured 2.86 ulp by tests/gelu/test_gelu_simd_math.cpp) where the reference's std::exp
// is within 1 ulp (2 u; glibc's libm-test-ulps). So the two double results differ by a relative
// delta, and rounding each to float moves them apart by at most one float ulp more (2^-23 relative,
// 2^-149 where the result is subnormal). Per entry, with n the row length:
//   softmax y_j = e_j / s: e_j differs by 10 u, s by 10 u and each sum's own rounding (n - 1) u, the
//     divisions 1 u each: delta = (2 n + 20) u, |dy_j| <= (2^-23 + delta) |y_j| + 2^-149.
//   log_softmax o_j = (x_j - m) - log s: log s differs by (2 n + 8) u (s's difference and its own
//     1 ulp in each tier, |log s| <= log n), the subtraction 1 u each:
//     |do_j| <= (2^-23 + 2 u) |o_j| + (2 n + 8 + 4 log n) u + 2^-149.
//   the backwards read those outputs: softmax's dx_j = y_j (g_j - sum_k g_k y_k) moves by
//     |dy_j| |g_j - dot| + |y_j| sum_k |g_k| |dy_k|, and by |y_j| 2 (n - 1) u sum_k |g_k y_k| where the
//     fast tier sums the dot product in 8 lanes (a contiguous row); log_softmax's dx_j = g_j - exp(o_j) sum_k g_k by
//     |sum_k g_k| exp(o_j) (|do_j| + 10 u) (its exp is the vector one too); then 2 u + 2^-23 of |dx_j|
//     and 2^-149.
// A factor (1 + 2^-20) covers the second-order terms; the bounds are computed from the reference's
// results, which are within one float rounding of the exact ones.
#include <cmath>
#include <limits>
#include <string>

#include <catch2/catch.hpp>

#include "core/engine/random.hpp"
#include "core/ops/ops.hpp"
#include "tests/support/tiers_support.hpp"

namespace xg_test_ops_tiers {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using xg::Array;
using xg::Tensor;

struct Run {
    Array y, dx;
};

// dtype float32: the same values rounded, run on the float32 kernels (results widened to compare).
Run run(const xg::test::TierRun& tier, const Array& x, const Array& g, bool log, int axis, xg::Dtype dtype = xg::kFloat64) {
    return xg::test::on(tier, [&] {
        Tensor xl(x, dtype, true);
        const Tensor y = log ? xg::log_softmax(xl, axis) : xg::softmax(xl, axis);
        y.backward(Tensor(g, dtype));
        return Run{y.value(), xl.grad().value()};
    });
}

struct Tolerances {
    Array y, dx;
};

// The float32 bounds above, entry by entry, for rows along `axis` of a 3-D x.
Tolerances float32_tolerances(const Run& reference, const Array& g, bool log, int axis) {
    const long double u = std::ldexp(1.0L, -53) * (1 + std::ldexp(1.0L, -20)), ulp32 = std::ldexp(1.0L, -23) * (1 + std::ldexp(1.0L, -20));
    const long double tiny = std::ldexp(1.0L, -149);
    const auto& shape = g.shape();
    const std::size_t a = static_cast<std::size_t>(axis < 0 ? axis + 3 : axis);
    std::size_t outer = 1, inner = 1;
    for (std::size_t d = 0; d < a; ++d) outer *= shape[d];
    for (std::size_t d = a + 1; d < 3; ++d) inner *= shape[d];
    const std::size_t n = shape[a];
    Tolerances t{Array::from_shape(shape), Array::from_shape(shape)};
    const double* y = reference.y.data();
    const double* dx = reference.dx.data();
    for (std::size_t o = 0; o < outer; ++o) {
        for (std::size_t i = 0; i < inner; ++i) {
            const std::size_t base = o * n * inner + i;
            const auto at = [&](std::size_t j) { return base + j * inner; };
            long double dot = 0, total = 0, moved = 0, dot_size = 0;  // sum g y, sum g, sum |g| |dy|, sum |g y|
            for (std::size_t j = 0; j < n; ++j) {
                const long double yj = y[at(j)];
                const long double tol = log ? (ulp32 + 2 * u) * std::fabs(yj) + (2.0L * n + 8 + 4 * std::log(static_cast<long double>(n))) * u + tiny
                                            : (ulp32 + (2.0L * n + 20) * u) * std::fabs(yj) + tiny;
                t.y.data()[at(j)] = static_cast<double>(tol);
                dot += g.data()[at(j)] * yj;
                total += g.data()[at(j)];
                moved += std::fabs(g.data()[at(j)]) * tol;
                dot_size += std::fabs(g.data()[at(j)] * yj);
            }
            const long double dot_order = 2.0L * static_cast<long double>(n - 1) * u * dot_size;
            for (std::size_t j = 0; j < n; ++j) {
                const long double yj = y[at(j)], gj = g.data()[at(j)], dy = t.y.data()[at(j)];
                const long double read =
                    log ? std::fabs(total) * std::exp(yj) * (dy + 10 * u) : dy * std::fabs(gj - dot) + std::fabs(yj) * (moved + dot_order);
                t.dx.data()[at(j)] = static_cast<double>(read + (ulp32 + 2 * u) * std::fabs(dx[at(j)]) + tiny);
            }
        }
    }
    return t;
}

TEST_CASE("tiers: softmax and log_softmax fast kernels match the reference, float64 bit for bit and float32 within a float "
          "rounding (every axis, 1 and 3 threads)",
          "[tiers][softmax]") {
    xg::Generator gen(26);
    Array x = xg::randn({7, 9, 613}, gen).value() * 3.0;  // 38 619 values: above the threads' split
    x.data()[5] = 1000.0, x.data()[6] = -1000.0, x.data()[700] = -std::numeric_limits<double>::infinity();
    const Array g = xg::randn({7, 9, 613}, gen).value();
    for (const xg::Dtype dtype : {xg::kFloat64, xg::kFloat32}) {  // float32: float storage, double arithmetic
        // float32: x and g as the float32 roundings the runs store, for the bounds
        const Array g_stored = dtype == xg::kFloat32 ? xg::to_float64_array(xg::to_float32_array(g)) : g;
        for (const bool log : {false, true}) {
            for (const int axis : {0, 1, 2, -1}) {
                const Run reference = run({xg::KernelTier::reference, 1}, x, g, log, axis, dtype);
                const Array zero = xt::zeros<double>(x.shape());
                const Tolerances tol = dtype == xg::kFloat32 ? float32_tolerances(reference, g_stored, log, axis) : Tolerances{zero, zero};
                for (const xg::test::TierRun& tier : xg::test::fast_runs()) {
                    const Run fast = run(tier, x, g, log, axis, dtype);
                    const std::string what = std::string(log ? "log_softmax" : "softmax") + " axis " + std::to_string(axis) + ", " +
                                             tier.name() + ", " + xg::dtype_name(dtype);
                    xg::test::require_within(fast.y, reference.y, tol.y, what + ": y");
                    xg::test::require_within(fast.dx, reference.dx, tol.dx, what + ": dx");
                }
            }
        }
    }
}

}  // namespace xg_test_ops_tiers
