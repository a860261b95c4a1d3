// softmax's and log_softmax's fast kernels (core/fast/softmax.cpp) against the reference kernels
// (core/reference/softmax.cpp), along every axis of an odd-sized 3-D tensor (strided rows), with
// logits of +-1000 and -inf, at 1 and 3 threads, in float64 and float32.
//
// Tolerance 0: both tiers do the same operations on the same values in the same order (the fast
// tier only hands whole rows to threads; C++17 builds do not contract into FMAs), so the bits
// agree, and any difference is a bug in one of them.
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

TEST_CASE("tiers: softmax and log_softmax fast kernels match the reference bit for bit (every axis, 1 and 3 threads)", "[tiers][softmax]") {
    xg::Generator gen(26);
    Array x = xg::randn({7, 9, 613}, gen).value() * 3.0;  // 38 619 values: above the threads' split
    x.data()[5] = 1000.0, x.data()[6] = -1000.0, x.data()[700] = -std::numeric_limits<double>::infinity();
    const Array g = xg::randn({7, 9, 613}, gen).value();
    for (const xg::Dtype dtype : {xg::kFloat64, xg::kFloat32}) {  // float32: float storage, the same double arithmetic
        for (const bool log : {false, true}) {
            for (const int axis : {0, 1, 2, -1}) {
                const Run reference = run({xg::KernelTier::reference, 1}, x, g, log, axis, dtype);
                const Array zero = xt::zeros<double>(x.shape());
                for (const xg::test::TierRun& tier : xg::test::fast_runs()) {
                    const Run fast = run(tier, x, g, log, axis, dtype);
                    const std::string what = std::string(log ? "log_softmax" : "softmax") + " axis " + std::to_string(axis) + ", " +
                                             tier.name() + ", " + xg::dtype_name(dtype);
                    xg::test::require_within(fast.y, reference.y, zero, what + ": y");
                    xg::test::require_within(fast.dx, reference.dx, zero, what + ": dx");
                }
            }
        }
    }
}

}  // namespace xg_test_ops_tiers
