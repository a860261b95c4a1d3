// cross_entropy's fast kernels (nn/fast/cross_entropy.cpp) against its reference kernels
// (nn/reference/cross_entropy.cpp): 37 rows of 11 classes, with and without class weights, with
// ignore_index out of range (-100) and in range (class 3, which also masks real rows), label
// smoothing 0 and 0.1, a -inf logit, every reduction, at 1 and 3 threads.
//
// Tolerances. The tiers compute the same exp(z_j - M) terms but sum them, and the smoothing
// sum, in different orders (the fast tier with `omp simd` reductions), and arrange the gradient's
// terms differently (the unweighted case without its coefficient 1). Summing C terms in any order
// is within (C - 1) u of the sum's absolute terms; for the positive exp terms that bounds
// log(sum) to 2 (C + 1) u between the tiers, and each log-probability l_j adds its own rounding:
// |dl_j| <= 2 (C + 1) u (1 + |log sum| + |l_j|). With the smoothing sum and the final roundings,
// each row's loss is within 4 (C + 2) u ((1 - s) |w_t| (1 + |log sum| + |l_t|) +
// (s / C) sum_j |w_j| (1 + |log sum| + |l_j|)), and each gradient element within
// 4 (C + 2) u |g| (|p_coef| p_j (1 + |log sum| + |l_j|) + (1 - s) |w_t| [j = t] + (s / C) |w_j|).
// The reductions add the same per-row values in the same order: the sum of the rows'
// bounds plus 2 N u sum |loss_n| for the two sums' own roundings.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/engine/random.hpp"
#include "nn/functional/losses.hpp"
#include "tests/support/tiers_support.hpp"

namespace xg_test_losses_tiers {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace nn = xg::nn;
using xg::Array;
using xg::IndexArray;
using xg::Tensor;
using xg::test::kUnitRoundoff;

constexpr std::size_t kRows = 37, kClasses = 11;

struct Run {
    Array loss, dz;
};

Run run(const xg::test::TierRun& tier, const Array& z, const IndexArray& t, const nn::CrossEntropyFuncOptions& options, const Array& g) {
    return xg::test::on(tier, [&] {
        Tensor zt(z, true);
        const Tensor loss = nn::cross_entropy(zt, t, options);
        loss.backward(Tensor(g));
        return Run{loss.value(), zt.grad().value()};
    });
}

TEST_CASE("tiers: cross_entropy fast kernels match the reference within the bounds of their summation orders", "[tiers][cross_entropy]") {
    xg::Generator gen(26);
    Array z = xg::randn({kRows, kClasses}, gen).value() * 4.0;
    z(2, 5) = -std::numeric_limits<double>::infinity();  // a masked logit (row 2's target is not 5)
    z(4, 0) = 1000.0, z(4, 1) = -1000.0;
    IndexArray t = IndexArray::from_shape({kRows});
    for (std::size_t n = 0; n < kRows; ++n) t(n) = static_cast<std::int64_t>(gen.uniform(0.0, kClasses - 1e-9));
    t(2) = 1, t(8) = 3;  // row 8 is ignored when ignore_index = 3, row 7 always
    const Array class_weight = xg::randn({kClasses}, gen).value() * 0.3 + 1.0;
    const Array g_rows = xg::randn({kRows}, gen).value();
    for (const bool weighted : {false, true}) {
        for (const std::int64_t ignore_index : {std::int64_t{-100}, std::int64_t{3}}) {
            t(7) = ignore_index;
            for (const double s : {0.0, 0.1}) {
                if (s > 0.0) z(2, 5) = -30.0;  // smoothing weighs every log-probability: a -inf one makes the loss inf in both
                for (const nn::Reduction reduction : {nn::Reduction::none, nn::Reduction::mean, nn::Reduction::sum}) {
                    nn::CrossEntropyFuncOptions options;
                    options.ignore_index(ignore_index).label_smoothing(s).reduction(reduction);
                    if (weighted) options.weight(Tensor(class_weight));
                    const bool none = reduction == nn::Reduction::none;
                    const Array g = none ? g_rows : Array(0.7);
                    const Run reference = run({xg::KernelTier::reference, 1}, z, t, options, g);

                    // The bounds above, from the reference's log-probabilities.
                    std::vector<double> row_tol(kRows, 0.0);
                    Array dz_tol = xt::zeros<double>({kRows, kClasses});
                    double w_sum = 0.0, denominator = 0.0;
                    for (std::size_t j = 0; j < kClasses; ++j) w_sum += weighted ? class_weight(j) : 1.0;
                    const double ulps = 4.0 * (kClasses + 2) * kUnitRoundoff;
                    for (std::size_t n = 0; n < kRows; ++n) {
                        if (t(n) == ignore_index) continue;
                        const auto target = static_cast<std::size_t>(t(n));
                        const auto w = [&](std::size_t j) { return weighted ? class_weight(j) : 1.0; };
                        denominator += w(target);
                        double M = -std::numeric_limits<double>::infinity(), sum = 0.0;
                        for (std::size_t j = 0; j < kClasses; ++j) M = std::max(M, z(n, j));
                        for (std::size_t j = 0; j < kClasses; ++j) sum += std::exp(z(n, j) - M);
                        const double log_sum = std::log(sum);
                        const auto spread = [&](std::size_t j) {  // 1 + |log sum| + |l_j|, 0 where p_j = 0
                            const double l = (z(n, j) - M) - log_sum;
                            return std::isinf(l) ? 0.0 : 1.0 + std::fabs(log_sum) + std::fabs(l);
                        };
                        double smooth = 0.0;
                        for (std::size_t j = 0; j < kClasses; ++j) smooth += std::fabs(w(j)) * spread(j);
                        row_tol[n] = ulps * ((1.0 - s) * std::fabs(w(target)) * spread(target) + s / kClasses * smooth);
                        const double p_coef = std::fabs((1.0 - s) * w(target) + s / kClasses * w_sum);
                        const double up = none ? g_rows(n) : 0.7;
                        for (std::size_t j = 0; j < kClasses; ++j) {
                            const double p = std::exp((z(n, j) - M) - log_sum);
                            dz_tol(n, j) = ulps * std::fabs(up) *
                                           (p_coef * p * spread(j) + (j == target ? (1.0 - s) * std::fabs(w(target)) : 0.0) +
                                            s / kClasses * std::fabs(w(j)));
                        }
                    }
                    if (!none) {  // every row's gradient carries mean's 1 / sum w_t
                        const double scale = reduction == nn::Reduction::mean ? 1.0 / denominator : 1.0;
                        dz_tol *= scale;
                        double tol = 0.0, abs_sum = 0.0;
                        for (std::size_t n = 0; n < kRows; ++n) tol += row_tol[n];
                        const Run rows = run({xg::KernelTier::reference, 1}, z, t, nn::CrossEntropyFuncOptions(options).reduction(nn::Reduction::none),
                                             xt::ones<double>({kRows}));
                        for (std::size_t n = 0; n < kRows; ++n) abs_sum += std::fabs(rows.loss(n));
                        row_tol.assign(1, std::fabs(scale) * (tol + 2.0 * kRows * kUnitRoundoff * abs_sum));
                    }
                    Array loss_tol = Array::from_shape(reference.loss.shape());
                    std::copy(row_tol.begin(), row_tol.begin() + static_cast<long>(loss_tol.size()), loss_tol.begin());
                    for (const xg::test::TierRun& tier : xg::test::fast_runs()) {
                        const Run fast = run(tier, z, t, options, g);
                        const std::string what = fmt::format("cross_entropy {}weighted, ignore_index {}, label_smoothing {}, reduction {}, {}",
                                                             weighted ? "" : "un", ignore_index, s, static_cast<int>(reduction), tier.name());
                        xg::test::require_within(fast.loss, reference.loss, loss_tol, what + ": loss");
                        xg::test::require_within(fast.dz, reference.dz, dz_tol, what + ": dz");
                    }
                }
            }
        }
    }
}

}  // namespace xg_test_losses_tiers
