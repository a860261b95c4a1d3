// `ctest -L tiers`: BatchNorm's fast kernels (nn/fast/batch_norm.cpp) against its reference kernels
// (nn/reference/batch_norm.cpp) within the tolerance of tests/support/norm_tiers.hpp, at 1 and 3
// threads, in training and evaluation, on float64 and on float32 storage; and batch_norm() on either
// tier, with and without weight and bias, including the running statistics it updates.
#include <cmath>
#include <cstdlib>
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/engine/kernel_tier.hpp"
#include "nn/fast/batch_norm.hpp"
#include "nn/functional/functional.hpp"
#include "nn/reference/batch_norm.hpp"
#include "tests/support/norm_tiers.hpp"

namespace xg_test_batch_norm_tiers {

namespace F = xg::nn::functional;
using xg::Array;
using xg::Tensor;
using xg_test_support::check_tiers_agree;

struct Shape3 {
    std::size_t N, C, L;
};

// (N, C) inputs (L = 1) with short and long rows, a single sample (N = 1), odd sizes, shares for
// threads, and outputs of 4 MiB or more with rows (L = 1) or segments (L > 1) longer than 4 KiB
// (streaming stores in nn/fast/).
constexpr Shape3 kShapes[] = {{2, 3, 1}, {37, 19, 1}, {1, 5, 7}, {7, 3, 33}, {65, 600, 1}, {1030, 520, 1}, {8, 4, 16400}};

TEST_CASE("batch_norm tiers: fast kernels match the reference kernels", "[tiers][batch_norm]") {
    xg_test_support::ThreadCountGuard restore;
    for (const auto [N, C, L] : kShapes) {
        const std::size_t M = N * L;
        const Array x = xg_test_support::random_array({N, C, L}, 21, 3.0, 1.0), g = xg_test_support::random_array({N, C, L}, 22);
        const Array w = xg_test_support::random_array({C}, 23), b = xg_test_support::random_array({C}, 24);
        for (int threads : xg_test_support::kTierThreadCounts) {
            xg::set_num_threads(threads);
            for (int training = 0; training < 2; ++training) {
                const std::string at = fmt::format("({}, {}, {}) at {} threads, training {}", N, C, L, threads, training);
                Array mean[2], var[2], rstd[2], y[2], dx[2], dw[2], db[2];
                for (int fast = 0; fast < 2; ++fast) {
                    mean[fast] = Array::from_shape({C}), var[fast] = Array::from_shape({C});
                    (fast ? xg::nn::fast::batch_norm_stats<double> : xg::nn::reference::batch_norm_stats<double>)(
                        x.data(), mean[fast].data(), var[fast].data(), N, C, L);
                    // evaluation normalises with given (running) statistics: the same for both tiers
                    if (!training) {
                        mean[fast] = xg_test_support::random_array({C}, 25);
                        var[fast] = xt::abs(xg_test_support::random_array({C}, 33)) + 0.5;
                    }
                    rstd[fast] = 1.0 / xt::sqrt(var[fast] + 1e-5);
                    y[fast] = Array::from_shape({N, C, L}), dx[fast] = Array::from_shape({N, C, L});
                    dw[fast] = xt::zeros<double>({C}), db[fast] = xt::zeros<double>({C});
                    (fast ? xg::nn::fast::batch_norm_forward<double> : xg::nn::reference::batch_norm_forward<double>)(
                        x.data(), w.data(), b.data(), mean[fast].data(), rstd[fast].data(), y[fast].data(), N, C, L);
                    (fast ? xg::nn::fast::batch_norm_backward<double> : xg::nn::reference::batch_norm_backward<double>)(
                        x.data(), g.data(), w.data(), mean[fast].data(), rstd[fast].data(), dx[fast].data(), dw[fast].data(),
                        db[fast].data(), N, C, L, training);
                }
                check_tiers_agree("mean " + at, mean[1], mean[0], M);
                check_tiers_agree("var " + at, var[1], var[0], M);
                check_tiers_agree("y " + at, y[1], y[0], M);
                check_tiers_agree("dx " + at, dx[1], dx[0], M, xg_test_support::dx_magnitude(w, rstd[0], g));
                check_tiers_agree("dw " + at, dw[1], dw[0], M);
                check_tiers_agree("db " + at, db[1], db[0], M);
            }
        }
    }
}

// The float32 kernels (x, g, w, b, y, dx float; statistics and sums double). Both tiers widen every
// value read, compute in double and round y and dx once at their store, so their double results F
// (fast) and R (reference) are those of the double kernels on the same values, which differ by at
// most tier_tolerance (mean, var, dw and db are such double results, checked as above). y and dx
// add one rounding each (u = 2^-24 relative, round to nearest):
//   |fl(F) - fl(R)| <= |F - R| + u |F| + u |R| <= (1 + u) |F - R| + 2 u |R|,  |R| <= |fl(R)| / (1 - u),
// and tier_tolerance, computed from max |fl(R)| instead of max |R|, grows by at most 1 / (1 - u).
void check_float32_tiers_agree(const std::string& what, const xg::FloatArray& fast, const xg::FloatArray& reference,
                               std::size_t terms, double magnitude = 0.0) {
    REQUIRE(fast.shape() == reference.shape());
    const Array f = xg::to_float64_array(fast), r = xg::to_float64_array(reference);
    const double u = std::ldexp(1.0, -24);
    const double worst = r.size() == 0 ? 0.0 : xt::amax(xt::abs(f - r))();
    const double max_r = r.size() == 0 ? 0.0 : xt::amax(xt::abs(r))();
    const double tolerance =
        (1 + u) / (1 - u) * xg_test_support::tier_tolerance(r, terms, magnitude) + 2 * u / (1 - u) * max_r;
    INFO(fmt::format("{} (float32): max |fast - reference| = {:.3g}, tolerance {:.3g} (ratio {:.3g})", what, worst, tolerance,
                     tolerance > 0 ? worst / tolerance : 0.0));
    if (std::getenv("XGRAD_PRINT_TIER_RATIOS") != nullptr) fmt::print("{:.3g}  {} (float32)\n", worst / tolerance, what);
    CHECK(worst <= tolerance);
    CHECK(std::isfinite(worst));
}

// kShapes, and outputs of 4 MiB of floats or more (streaming float stores), rows long enough to be
// mapped four or two at a time (C = 520) and segments (L > 1)
constexpr Shape3 kFloat32Shapes[] = {{2, 3, 1},     {37, 19, 1},  {1, 5, 7},        {7, 3, 33},
                                     {65, 600, 1},  {1030, 520, 1}, {8, 4, 16400}, {2060, 520, 1}, {8, 8, 16400}};

struct Float32Results {
    Array mean, var, rstd, dw, db;
    xg::FloatArray y, dx;
};

TEST_CASE("batch_norm tiers: float32 fast kernels match the float32 reference kernels", "[tiers][batch_norm]") {
    for (const auto [N, C, L] : kFloat32Shapes) {
        const std::size_t M = N * L;
        const Array x64 = xg::to_float64_array(xg::to_float32_array(xg_test_support::random_array({N, C, L}, 21, 3.0, 1.0)));
        const Array g64 = xg::to_float64_array(xg::to_float32_array(xg_test_support::random_array({N, C, L}, 22)));
        const Array w64 = xg::to_float64_array(xg::to_float32_array(xg_test_support::random_array({C}, 23)));
        const xg::FloatArray x = xg::to_float32_array(x64), g = xg::to_float32_array(g64), w = xg::to_float32_array(w64);
        const xg::FloatArray b = xg::to_float32_array(xg_test_support::random_array({C}, 24));
        for (int training = 0; training < 2; ++training) {
            const auto kernels = [&](bool fast) {
                Float32Results r{Array::from_shape({C}), Array::from_shape({C}), Array(), xt::zeros<double>({C}), xt::zeros<double>({C}),
                                 xg::FloatArray::from_shape({N, C, L}), xg::FloatArray::from_shape({N, C, L})};
                (fast ? xg::nn::fast::batch_norm_stats<float> : xg::nn::reference::batch_norm_stats<float>)(
                    x.data(), r.mean.data(), r.var.data(), N, C, L);
                // evaluation normalises with given (running) statistics: the same for both tiers
                if (!training) {
                    r.mean = xg_test_support::random_array({C}, 25);
                    r.var = xt::abs(xg_test_support::random_array({C}, 33)) + 0.5;
                }
                r.rstd = 1.0 / xt::sqrt(r.var + 1e-5);
                (fast ? xg::nn::fast::batch_norm_forward<float> : xg::nn::reference::batch_norm_forward<float>)(
                    x.data(), w.data(), b.data(), r.mean.data(), r.rstd.data(), r.y.data(), N, C, L);
                (fast ? xg::nn::fast::batch_norm_backward<float> : xg::nn::reference::batch_norm_backward<float>)(
                    x.data(), g.data(), w.data(), r.mean.data(), r.rstd.data(), r.dx.data(), r.dw.data(), r.db.data(), N, C, L,
                    training);
                return r;
            };
            const std::string what = fmt::format("float32 ({}, {}, {}), training {}", N, C, L, training);
            xg_test_support::compare_kernel_tiers(what, kernels, [&](const Float32Results& fast, const Float32Results& reference,
                                                                     const std::string& at) {
                check_tiers_agree("mean " + at, fast.mean, reference.mean, M);
                check_tiers_agree("var " + at, fast.var, reference.var, M);
                check_tiers_agree("dw " + at, fast.dw, reference.dw, M);
                check_tiers_agree("db " + at, fast.db, reference.db, M);
                check_float32_tiers_agree("y " + at, fast.y, reference.y, M);
                check_float32_tiers_agree("dx " + at, fast.dx, reference.dx, M, xg_test_support::dx_magnitude(w64, reference.rstd, g64));
            });
        }
    }
}

TEST_CASE("batch_norm tiers: the op on either tier, with and without weight and bias", "[tiers][batch_norm]") {
    const Array xv = xg_test_support::random_array({6, 4, 5, 3}, 26, 2.0, -1.0), gv = xg_test_support::random_array({6, 4, 5, 3}, 27);
    for (int training = 0; training < 2; ++training) {
        for (int affine = 0; affine < 4; ++affine) {
            const bool has_w = affine & 1, has_b = affine & 2;
            Tensor out[2], x[2], w[2], b[2], running_mean[2], running_var[2];
            for (int fast = 0; fast < 2; ++fast) {
                const xg::KernelTierGuard tier(fast ? xg::KernelTier::fast : xg::KernelTier::reference);
                x[fast] = Tensor(xv, true);
                if (has_w) w[fast] = Tensor(xg_test_support::random_array({4}, 28), true);
                if (has_b) b[fast] = Tensor(xg_test_support::random_array({4}, 29), true);
                running_mean[fast] = Tensor(xg_test_support::random_array({4}, 30));
                running_var[fast] = Tensor(xg_test_support::random_array({4}, 31, 0.1, 1.0));
                out[fast] = F::batch_norm(x[fast], running_mean[fast], running_var[fast], w[fast], b[fast], training, 0.1);
                out[fast].backward(Tensor(gv));
            }
            const std::string with = fmt::format("training {}, weight {}, bias {}", training, has_w, has_b);
            check_tiers_agree("y, " + with, out[1].value(), out[0].value(), 90);
            check_tiers_agree("dx, " + with, x[1].grad_value(), x[0].grad_value(), 90);
            check_tiers_agree("running_mean, " + with, running_mean[1].value(), running_mean[0].value(), 90);
            check_tiers_agree("running_var, " + with, running_var[1].value(), running_var[0].value(), 90);
            if (has_w) check_tiers_agree("dw, " + with, w[1].grad_value(), w[0].grad_value(), 90);
            if (has_b) check_tiers_agree("db, " + with, b[1].grad_value(), b[0].grad_value(), 90);
        }
    }
}

TEST_CASE("batch_norm tiers: the op runs the kernels of the tier it is on", "[tiers][batch_norm]") {
    const std::size_t N = 9, C = 5, L = 7;
    const Array x = xg_test_support::random_array({N, C, L}, 32, 3.0, 1.0);
    const Array ones = xt::ones<double>({C}), zeros = xt::zeros<double>({C});
    for (int fast = 0; fast < 2; ++fast) {
        const xg::KernelTierGuard tier(fast ? xg::KernelTier::fast : xg::KernelTier::reference);
        Array mean = Array::from_shape({C}), var = Array::from_shape({C}), y = Array::from_shape({N, C, L});
        (fast ? xg::nn::fast::batch_norm_stats<double> : xg::nn::reference::batch_norm_stats<double>)(x.data(), mean.data(),
                                                                                                      var.data(), N, C, L);
        const Array rstd = 1.0 / xt::sqrt(var + 1e-5);
        (fast ? xg::nn::fast::batch_norm_forward<double> : xg::nn::reference::batch_norm_forward<double>)(
            x.data(), ones.data(), zeros.data(), mean.data(), rstd.data(), y.data(), N, C, L);
        CHECK(F::batch_norm(Tensor(x), Tensor(), Tensor(), Tensor(), Tensor(), true).value() == y);  // bit for bit
    }
}

}  // namespace xg_test_batch_norm_tiers
