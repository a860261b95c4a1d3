// `ctest -L tiers`: GroupNorm's fast kernels (nn/fast/group_norm.cpp) against its reference kernels
// (nn/reference/group_norm.cpp) within the tolerance of tests/support/norm_tiers.hpp, at 1 and 3
// threads, InstanceNorm's shapes (G = C) included; and group_norm() and instance_norm() on either
// tier, with and without weight and bias.
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/engine/kernel_tier.hpp"
#include "nn/fast/group_norm.hpp"
#include "nn/functional/functional.hpp"
#include "nn/reference/group_norm.hpp"
#include "tests/support/norm_tiers.hpp"

namespace xg_test_group_norm_tiers {

namespace F = xg::nn::functional;
using xg::Array;
using xg::Tensor;
using xg_test_support::check_tiers_agree;

struct Groups {
    std::size_t N, C, G, S;
};

// Odd sizes, one group (LayerNorm over (C, S)), one channel per group (InstanceNorm), a single
// sample, a single value per channel, shares for threads, and outputs of 4 MiB or more with
// channels longer than 4 KiB (streaming stores in nn/fast/).
constexpr Groups kShapes[] = {{2, 6, 3, 5}, {5, 9, 3, 7}, {1, 4, 1, 1}, {3, 4, 4, 9}, {4, 6, 1, 1}, {16, 32, 8, 64}, {4, 8, 2, 16400}};

TEST_CASE("group_norm tiers: fast kernels match the reference kernels", "[tiers][group_norm]") {
    xg_test_support::ThreadCountGuard restore;
    for (const auto [N, C, G, S] : kShapes) {
        const std::size_t D = C / G * S;
        const Array x = xg_test_support::random_array({N, C, S}, 41, 3.0, 1.0), g = xg_test_support::random_array({N, C, S}, 42);
        const Array w = xg_test_support::random_array({C}, 43), b = xg_test_support::random_array({C}, 44);
        for (int threads : xg_test_support::kTierThreadCounts) {
            xg::set_num_threads(threads);
            const std::string at = fmt::format("N {} C {} G {} S {} at {} threads", N, C, G, S, threads);
            Array y[2], mean[2], rstd[2], var[2], dx[2], dw[2], db[2], dw_only[2];
            for (int fast = 0; fast < 2; ++fast) {
                y[fast] = Array::from_shape({N, C, S}), dx[fast] = Array::from_shape({N, C, S});
                mean[fast] = Array::from_shape({N * G}), rstd[fast] = Array::from_shape({N * G}), var[fast] = Array::from_shape({N * G});
                dw[fast] = xt::zeros<double>({C}), db[fast] = xt::zeros<double>({C}), dw_only[fast] = xt::zeros<double>({C});
                Array db_only = xt::zeros<double>({C});
                auto* forward = fast ? xg::nn::fast::group_norm_forward<double> : xg::nn::reference::group_norm_forward<double>;
                auto* backward = fast ? xg::nn::fast::group_norm_backward<double> : xg::nn::reference::group_norm_backward<double>;
                forward(x.data(), w.data(), b.data(), y[fast].data(), mean[fast].data(), rstd[fast].data(), var[fast].data(), N, C, G,
                        S, 1e-5);
                backward(x.data(), g.data(), w.data(), mean[fast].data(), rstd[fast].data(), dx[fast].data(), dw[fast].data(),
                         db[fast].data(), N, C, G, S);
                backward(x.data(), g.data(), w.data(), mean[fast].data(), rstd[fast].data(), nullptr, dw_only[fast].data(),
                         db_only.data(), N, C, G, S);
            }
            check_tiers_agree("y " + at, y[1], y[0], D);
            check_tiers_agree("mean " + at, mean[1], mean[0], D);
            check_tiers_agree("rstd " + at, rstd[1], rstd[0], D);
            check_tiers_agree("var " + at, var[1], var[0], D);
            check_tiers_agree("dx " + at, dx[1], dx[0], D, xg_test_support::dx_magnitude(w, rstd[0], g));
            check_tiers_agree("dw " + at, dw[1], dw[0], std::max(D, N * S));
            check_tiers_agree("db " + at, db[1], db[0], std::max(D, N * S));
            check_tiers_agree("dw without dx " + at, dw_only[1], dw_only[0], std::max(D, N * S));
        }
    }
}

TEST_CASE("group_norm tiers: group_norm and instance_norm on either tier, with and without weight and bias",
          "[tiers][group_norm]") {
    const Array xv = xg_test_support::random_array({3, 6, 5, 7}, 45, 2.0, -1.0), gv = xg_test_support::random_array({3, 6, 5, 7}, 46);
    for (int instance = 0; instance < 2; ++instance) {
        for (int affine = 0; affine < 4; ++affine) {
            const bool has_w = affine & 1, has_b = affine & 2;
            Tensor out[2], x[2], w[2], b[2], running_mean[2];
            for (int fast = 0; fast < 2; ++fast) {
                const xg::KernelTierGuard tier(fast ? xg::KernelTier::fast : xg::KernelTier::reference);
                x[fast] = Tensor(xv, true);
                if (has_w) w[fast] = Tensor(xg_test_support::random_array({6}, 47), true);
                if (has_b) b[fast] = Tensor(xg_test_support::random_array({6}, 48), true);
                running_mean[fast] = xg::zeros({6});
                out[fast] = instance ? F::instance_norm(x[fast], running_mean[fast], Tensor(), w[fast], b[fast])
                                     : F::group_norm(x[fast], 3, w[fast], b[fast]);
                out[fast].backward(Tensor(gv));
            }
            const std::size_t D = instance ? 35 : 70;
            const std::string with = fmt::format("instance_norm {}, weight {}, bias {}", instance, has_w, has_b);
            check_tiers_agree("y, " + with, out[1].value(), out[0].value(), D);
            check_tiers_agree("dx, " + with, x[1].grad_value(), x[0].grad_value(), D);
            check_tiers_agree("running_mean, " + with, running_mean[1].value(), running_mean[0].value(), D);
            if (has_w) check_tiers_agree("dw, " + with, w[1].grad_value(), w[0].grad_value(), 105);
            if (has_b) check_tiers_agree("db, " + with, b[1].grad_value(), b[0].grad_value(), 105);
        }
    }
}

TEST_CASE("group_norm tiers: the op runs the kernels of the tier it is on", "[tiers][group_norm]") {
    const std::size_t N = 4, C = 6, G = 2, S = 9;
    const Array x = xg_test_support::random_array({N, C, S}, 49, 3.0, 1.0);
    const Array ones = xt::ones<double>({C}), zeros = xt::zeros<double>({C});
    for (int fast = 0; fast < 2; ++fast) {
        const xg::KernelTierGuard tier(fast ? xg::KernelTier::fast : xg::KernelTier::reference);
        Array y = Array::from_shape({N, C, S}), mean = Array::from_shape({N * G}), rstd = Array::from_shape({N * G}),
              var = Array::from_shape({N * G});
        (fast ? xg::nn::fast::group_norm_forward<double> : xg::nn::reference::group_norm_forward<double>)(
            x.data(), ones.data(), zeros.data(), y.data(), mean.data(), rstd.data(), var.data(), N, C, G, S, 1e-5);
        CHECK(F::group_norm(Tensor(x), static_cast<std::int64_t>(G)).value() == y);  // bit for bit
    }
}

}  // namespace xg_test_group_norm_tiers
