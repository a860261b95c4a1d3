// DyT's fast kernels (nn/fast/dyt.cpp) against its reference kernels (nn/reference/dyt.cpp), with
// and without weight and bias, at 1 and 3 threads (the kernels run on one; the test pins that
// nothing changes).
//
// Tolerances. y, dx, dw and db are the same operations on the same values in the same order in
// both tiers (std::tanh both; C++17 builds do not contract into FMAs): equal bits, tolerance 0.
// dalpha = sum over all m elements of T = g w (1 - t^2) x: the same terms, summed in eight partial
// sums per row by the fast tier and one running sum by the reference. Any order of summing m terms
// is within (m - 1) u sum |T| of the exact sum, so the tiers differ by at most 2 m u sum |T|.
#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

#include "core/engine/random.hpp"
#include "nn/modules/dyt.hpp"
#include "tests/support/tiers_support.hpp"

namespace xg_test_dyt_tiers {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using xg::Array;
using xg::Shape;
using xg::Tensor;

struct Run {
    Array y, dx, dalpha, dw, db;
};

Run run(const xg::test::TierRun& tier, const Array& x, const Array& alpha, const Array& w, const Array& b, const Array& g,
        const Shape& normalized) {
    return xg::test::on(tier, [&] {
        Tensor xl(x, true), at(alpha, true), wt = w.dimension() > 0 ? Tensor(w, true) : Tensor(), bt = b.dimension() > 0 ? Tensor(b, true) : Tensor();
        const Tensor y = F::dyt(xl, normalized, at, wt, bt);
        y.backward(Tensor(g));
        return Run{y.value(), xl.grad().value(), at.grad().value(), wt.defined() ? wt.grad().value() : Array(), bt.defined() ? bt.grad().value() : Array()};
    });
}

TEST_CASE("tiers: dyt fast kernels match the reference (bit for bit, dalpha within its summation bound)", "[tiers][dyt]") {
    xg::Generator gen(26);
    const Shape shape{13, 7, 31}, normalized{7, 31};  // odd sizes: 13 rows of 217
    const Array x = xg::randn(shape, gen).value() * 2.0, g = xg::randn(shape, gen).value();
    const Array alpha = Array({0.7});
    for (const bool affine : {true, false}) {
        const Array w = affine ? Array(xg::randn(normalized, gen).value()) : Array(), b = affine ? Array(xg::randn(normalized, gen).value()) : Array();
        const Run reference = run({xg::KernelTier::reference, 1}, x, alpha, w, b, g, normalized);
        long double sum_abs = 0.0L;  // sum |g w (1 - t^2) x|
        for (std::size_t k = 0; k < x.size(); ++k) {
            const long double t = std::tanh(0.7L * x.data()[k]), wk = affine ? w.data()[k % w.size()] : 1.0;
            sum_abs += std::fabs(g.data()[k] * wk * (1 - t * t) * x.data()[k]);
        }
        const Array dalpha_tol = Array({static_cast<double>(2 * x.size() * xg::test::kUnitRoundoff * sum_abs)});
        for (const xg::test::TierRun& tier : xg::test::fast_runs()) {
            const Run fast = run(tier, x, alpha, w, b, g, normalized);
            const std::string what = std::string(affine ? "dyt with weight and bias, " : "dyt without weight and bias, ") + tier.name();
            const auto exact = [](const Array& a) { return Array(xt::zeros<double>(a.shape())); };
            xg::test::require_within(fast.y, reference.y, exact(reference.y), what + ": y");
            xg::test::require_within(fast.dx, reference.dx, exact(reference.dx), what + ": dx");
            xg::test::require_within(fast.dalpha, reference.dalpha, dalpha_tol, what + ": dalpha");
            if (affine) {
                xg::test::require_within(fast.dw, reference.dw, exact(reference.dw), what + ": dw");
                xg::test::require_within(fast.db, reference.db, exact(reference.db), what + ": db");
            }
        }
    }
}

}  // namespace xg_test_dyt_tiers
