// conv2d's, max_pool2d's and avg_pool2d's fast kernels (nn/fast/conv.cpp: im2col + GEMM; nn/fast/
// pool.cpp) against the reference kernels (nn/reference/conv.cpp: the direct sums;
// nn/reference/pool.cpp), with odd sizes, strides, padding, dilation, groups, ceil_mode and
// count_include_pad, at 1 and 3 threads.
//
// Tolerances. conv2d: every output is a sum of m products (y: the K = C/G KH KW taps and the bias;
// dx: O/G KH KW; dW and db: N OH OW), which the GEMM (blocked, perhaps with FMAs) and the direct
// loop add in different orders. Any order is within (m - 1) u of the sum of the terms' absolute
// values, so the tiers differ by at most 2 (m + 2) u times that sum, which the test gets by running
// the op on |x|, |W|, |b| and |dy|. Pooling: both tiers select the same element (max) or add the
// same values in the same order (average): tolerance 0.
#include <cmath>
#include <limits>
#include <string>

#include <catch2/catch.hpp>

#include "core/engine/random.hpp"
#include "nn/modules/conv.hpp"
#include "tests/support/tiers_support.hpp"

namespace xg_test_conv_tiers {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using xg::Array;
using xg::Shape;
using xg::Tensor;
namespace F = xg::nn::functional;

struct ConvCase {
    Shape x, w;
    bool bias;
    xg::nn::Size2 stride, padding, dilation;
    std::int64_t groups;
};

struct ConvRun {
    Array y, dx, dw, db;
};

ConvRun run_conv(const xg::test::TierRun& tier, const ConvCase& c, const Array& x, const Array& w, const Array& b, const Array& g) {
    return xg::test::on(tier, [&] {
        Tensor xl(x, true), wt(w, true), bt = c.bias ? Tensor(b, true) : Tensor();
        const Tensor y = F::conv2d(xl, wt, bt, c.stride, c.padding, c.dilation, c.groups);
        if (g.size() <= 1) return ConvRun{y.value(), Array(), Array(), Array()};  // the forward alone
        y.backward(Tensor(g));
        return ConvRun{y.value(), xl.grad().value(), wt.grad().value(), c.bias ? bt.grad().value() : Array()};
    });
}

Array tolerance(const Array& scale, std::size_t terms) { return xg::test::ulps_of(scale, 2.0 * static_cast<double>(terms + 2)); }

TEST_CASE("tiers: conv2d im2col + GEMM matches the direct sums within their summation bounds", "[tiers][conv2d]") {
    const ConvCase cases[] = {
        {{4, 4, 23, 19}, {6, 4, 3, 3}, true, 1, 1, 1, 1},                  // 3 x 3, padding 1: above the threads' split
        {{3, 4, 17, 21}, {6, 2, 3, 2}, true, {2, 3}, {2, 1}, {2, 1}, 2},   // strides, padding, dilation, 2 groups
        {{5, 4, 9, 13}, {4, 1, 1, 5}, false, 1, {0, 2}, 1, 4},             // depthwise 1 x 5, no bias
    };
    xg::Generator gen(26);
    for (const ConvCase& c : cases) {
        const Array x = xg::randn(c.x, gen).value(), w = xg::randn(c.w, gen).value(), b = xg::randn({c.w[0]}, gen).value();
        const xg::test::TierRun reference_run{xg::KernelTier::reference, 1};
        const Array y0 = run_conv(reference_run, c, x, w, b, Array(0.0)).y;  // for dy's shape
        const Array g = xg::randn(Shape(y0.shape().begin(), y0.shape().end()), gen).value();
        const ConvRun reference = run_conv(reference_run, c, x, w, b, g);
        const ConvRun scale = run_conv(reference_run, c, xt::abs(x), xt::abs(w), xt::abs(b), xt::abs(g));
        const std::size_t OH = g.shape()[2], OW = g.shape()[3];
        const std::size_t taps = c.w[1] * c.w[2] * c.w[3] + 1, per_input = c.w[0] / static_cast<std::size_t>(c.groups) * c.w[2] * c.w[3],
                          per_weight = c.x[0] * OH * OW;
        for (const xg::test::TierRun& tier : xg::test::fast_runs()) {
            const ConvRun fast = run_conv(tier, c, x, w, b, g);
            const std::string what = fmt::format("conv2d x {} w {} groups {}, {}", xg::shape_str(c.x), xg::shape_str(c.w), c.groups, tier.name());
            xg::test::require_within(fast.y, reference.y, tolerance(scale.y, taps), what + ": y");
            xg::test::require_within(fast.dx, reference.dx, tolerance(scale.dx, per_input), what + ": dx");
            xg::test::require_within(fast.dw, reference.dw, tolerance(scale.dw, per_weight), what + ": dW");
            if (c.bias) xg::test::require_within(fast.db, reference.db, tolerance(scale.db, per_weight), what + ": db");
        }
    }
}

struct PoolRun {
    Array y, dx;
};

TEST_CASE("tiers: max_pool2d and avg_pool2d fast kernels match the reference bit for bit", "[tiers][pool2d]") {
    xg::Generator gen(26);
    // Whole numbers in [-4, 4]: windows with tied maxima, and a NaN, which wins its windows.
    Array x = xt::round(xg::randn({3, 5, 17, 14}, gen).value() * 2.0);
    x(1, 2, 3, 4) = std::numeric_limits<double>::quiet_NaN();
    struct PoolCase {
        bool max;
        xg::nn::Size2 kernel, stride, padding, dilation;
        bool ceil_mode, count_include_pad;
    };
    const PoolCase cases[] = {
        {true, 3, 2, 1, 2, true, false},         {true, {3, 2}, {1, 2}, {1, 0}, 1, false, false},
        {false, {3, 2}, {2, 1}, {1, 1}, 1, true, true}, {false, {3, 2}, {2, 1}, {1, 1}, 1, true, false},
        {false, 5, 3, 2, 1, false, true},
    };
    for (const PoolCase& c : cases) {
        const auto run = [&](const xg::test::TierRun& tier, const Array& g) {
            return xg::test::on(tier, [&] {
                Tensor xl(x, true);
                const Tensor y = c.max ? F::max_pool2d(xl, c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode)
                                       : F::avg_pool2d(xl, c.kernel, c.stride, c.padding, c.ceil_mode, c.count_include_pad);
                if (g.size() > 1) y.backward(Tensor(g));
                return PoolRun{y.value(), g.size() > 1 ? xl.grad().value() : Array()};
            });
        };
        const Array y0 = run({xg::KernelTier::reference, 1}, Array(0.0)).y;
        const Array g = xg::randn(Shape(y0.shape().begin(), y0.shape().end()), gen).value();
        const PoolRun reference = run({xg::KernelTier::reference, 1}, g);
        for (const xg::test::TierRun& tier : xg::test::fast_runs()) {
            const PoolRun fast = run(tier, g);
            const std::string what = fmt::format("{} kernel {} stride {} padding {} ceil_mode {} count_include_pad {}, {}",
                                                 c.max ? "max_pool2d" : "avg_pool2d", c.kernel.h * 10 + c.kernel.w, c.stride.h * 10 + c.stride.w,
                                                 c.padding.h * 10 + c.padding.w, c.ceil_mode, c.count_include_pad, tier.name());
            xg::test::require_within(fast.y, reference.y, xt::zeros<double>(reference.y.shape()), what + ": y");
            xg::test::require_within(fast.dx, reference.dx, xt::zeros<double>(reference.dx.shape()), what + ": dx");
        }
    }
}

}  // namespace xg_test_conv_tiers
