// layer_norm's variance is two-pass on both kernel tiers: on rows where the one-pass formula
// E[x^2] - mean^2 collapses even in float64 (kappa^2 u > 1, kappa = sqrt(1 + (mean/sigma)^2),
// u = 2^-53), every output row keeps the variance var / (var + eps). PyTorch issues 40302 and 51102
// were this bug in float32 (tutorial 19, docs/tutorials/19-precision-lab.md).
#include <cmath>
#include <cstddef>
#include <vector>

#include <catch2/catch.hpp>

#include "core/engine/kernel_tier.hpp"
#include "core/engine/random.hpp"
#include "nn/functional/functional.hpp"

namespace xg_test_layer_norm_precision {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using xg::Array;
using xg::Tensor;

namespace {

// Mean and biased variance of n values in long double (64-bit significand), two-pass.
void mean_var(const double* x, std::size_t n, long double& mean, long double& var) {
    long double s = 0;
    for (std::size_t j = 0; j < n; ++j) s += x[j];
    mean = s / n;
    long double sq = 0;
    for (std::size_t j = 0; j < n; ++j) sq += (x[j] - mean) * (x[j] - mean);
    var = sq / n;
}

}  // namespace

TEST_CASE("layer_norm keeps each output row's variance where one-pass collapses in float64, on both tiers",
          "[fused][precision]") {
    const std::size_t R = 8, D = 768;
    const double eps = 1e-5;
    xg::Generator gen(1983);
    Array x = Array::from_shape({R, D});
    for (double& v : x) v = 1e9 + gen.normal();  // kappa ~ 1e9: kappa^2 2^-53 ~ 111 > 1, kappa 2^-53 ~ 1e-7

    // The input is one the one-pass formula cannot handle: in float64 it loses every row's variance
    // (relative error >= 1 in each row), so a kernel that computed it that way would fail below.
    std::vector<long double> true_var(R);
    for (std::size_t r = 0; r < R; ++r) {
        const double* xr = x.data() + r * D;
        long double mean = 0;
        mean_var(xr, D, mean, true_var[r]);
        double s = 0, s2 = 0;
        for (std::size_t j = 0; j < D; ++j) {
            s += xr[j];
            s2 += xr[j] * xr[j];
        }
        const double m = s / D, one_pass = s2 / D - m * m;
        INFO("row " << r << ": one-pass " << one_pass << ", variance " << static_cast<double>(true_var[r]));
        REQUIRE(std::fabs(one_pass - static_cast<double>(true_var[r])) >= static_cast<double>(true_var[r]));
    }

    for (xg::KernelTier tier : {xg::KernelTier::reference, xg::KernelTier::fast}) {
        xg::KernelTierGuard guard(tier);
        INFO((tier == xg::KernelTier::reference ? "reference" : "fast") << " kernels");
        const Array y = F::layer_norm(Tensor(x), {D}, Tensor(), Tensor(), eps).value();
        for (std::size_t r = 0; r < R; ++r) {
            long double mean = 0, var = 0;
            mean_var(y.data() + r * D, D, mean, var);
            const double expected = static_cast<double>(true_var[r] / (true_var[r] + eps));
            // Two-pass loses about kappa u ~ 1e-7 of the variance (the mean's rounding, ~ulp(1e9) / 2,
            // shifts every deviation); 1e-6 is ten times that. A one-pass variance is off by 100 % or more.
            INFO("row " << r << ": output variance " << static_cast<double>(var) << ", expected " << expected);
            CHECK(std::fabs(static_cast<double>(var) - expected) <= 1e-6);
            CHECK(std::fabs(static_cast<double>(mean)) <= 1e-6);
        }
    }
}

}  // namespace xg_test_layer_norm_precision
