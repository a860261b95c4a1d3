// `ctest -L tiers`: LayerNorm's fast kernels (nn/fast/layer_norm.cpp) against its reference kernels
// (nn/reference/layer_norm.cpp) within the tolerance of tests/support/norm_tiers.hpp, at 1 and 3
// threads; and layer_norm() on either tier, with and without weight and bias.
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/engine/kernel_tier.hpp"
#include "nn/fast/layer_norm.hpp"
#include "nn/functional/functional.hpp"
#include "nn/reference/layer_norm.hpp"
#include "tests/support/norm_tiers.hpp"

namespace xg_test_layer_norm_tiers {

namespace F = xg::nn::functional;
using xg::Array;
using xg::Tensor;
using xg_test_support::check_tiers_agree;

struct Shape2 {
    std::size_t rows, D;
};

// Odd widths, a single row, a single element per row, rows of two (computed in double by the fast
// float32 kernels), threads' shares, and outputs of 4 MiB or more
// with rows longer than 4 KiB (streaming stores and the next row's prefetch in nn/fast/).
constexpr Shape2 kShapes[] = {{1, 7}, {37, 83}, {5, 1}, {6, 2}, {3, 2049}, {64, 768}, {128, 4100}};

TEST_CASE("layer_norm tiers: fast kernels match the reference kernels", "[tiers][layer_norm]") {
    xg_test_support::ThreadCountGuard restore;
    for (const auto [rows, D] : kShapes) {
        const Array x = xg_test_support::random_array({rows, D}, 1, 3.0, 1.0), g = xg_test_support::random_array({rows, D}, 2);
        const Array w = xg_test_support::random_array({D}, 3), b = xg_test_support::random_array({D}, 4);
        for (int threads : xg_test_support::kTierThreadCounts) {
            xg::set_num_threads(threads);
            const std::string at = fmt::format("({}, {}) at {} threads", rows, D, threads);
            Array y[2], mean[2], rstd[2], dx[2], dw[2], db[2], dw_only[2];
            for (int fast = 0; fast < 2; ++fast) {
                y[fast] = Array::from_shape({rows, D}), mean[fast] = Array::from_shape({rows}), rstd[fast] = Array::from_shape({rows});
                dx[fast] = Array::from_shape({rows, D});
                dw[fast] = xt::zeros<double>({D}), db[fast] = xt::zeros<double>({D}), dw_only[fast] = xt::zeros<double>({D});
                Array db_only = xt::zeros<double>({D});
                auto* forward = fast ? xg::nn::fast::layer_norm_forward<double> : xg::nn::reference::layer_norm_forward<double>;
                auto* backward = fast ? xg::nn::fast::layer_norm_backward<double> : xg::nn::reference::layer_norm_backward<double>;
                forward(x.data(), w.data(), b.data(), y[fast].data(), mean[fast].data(), rstd[fast].data(), rows, D, 1e-5);
                backward(x.data(), g.data(), w.data(), mean[fast].data(), rstd[fast].data(), dx[fast].data(), dw[fast].data(),
                         db[fast].data(), rows, D);
                // without dx (x needs no gradient): the parameter gradients alone
                backward(x.data(), g.data(), w.data(), mean[fast].data(), rstd[fast].data(), nullptr, dw_only[fast].data(),
                         db_only.data(), rows, D);
            }
            check_tiers_agree("y " + at, y[1], y[0], D);
            check_tiers_agree("mean " + at, mean[1], mean[0], D);
            check_tiers_agree("rstd " + at, rstd[1], rstd[0], D);
            check_tiers_agree("dx " + at, dx[1], dx[0], D, xg_test_support::dx_magnitude(w, rstd[0], g));
            check_tiers_agree("dw " + at, dw[1], dw[0], std::max(rows, D));
            check_tiers_agree("db " + at, db[1], db[0], std::max(rows, D));
            check_tiers_agree("dw without dx " + at, dw_only[1], dw_only[0], std::max(rows, D));
        }
    }
}

// The float32 kernels of both tiers on x (rows, D), at 1 and 3 threads, against the bounds of
// FloatArithmeticConditions (norm_tiers.hpp): the fast kernels compute in float.
void check_float32_kernels(const std::string& what, const xg::FloatArray& x, std::size_t rows, std::size_t D) {
    using xg::FloatArray;
    using xg_test_support::check_float_arithmetic_agrees;
    xg_test_support::ThreadCountGuard restore;
    const FloatArray g = xg::to_float32_array(xg_test_support::random_array({rows, D}, 2));
    const FloatArray w = xg::to_float32_array(xg_test_support::random_array({D}, 3));
    const FloatArray b = xg::to_float32_array(xg_test_support::random_array({D}, 4));
    const auto k = xg_test_support::float_arithmetic_scales(xg::to_float64_array(x), xg::to_float64_array(g), xg::to_float64_array(w),
                                                            xg::to_float64_array(b), rows, D, true, 1e-5);
    for (int threads : xg_test_support::kTierThreadCounts) {
        xg::set_num_threads(threads);
        const std::string at = fmt::format("{} ({}, {}) at {} threads", what, rows, D, threads);
        FloatArray y[2], dx[2];
        Array mean[2], rstd[2], dw[2], db[2], dw_only[2];
        for (int fast = 0; fast < 2; ++fast) {
            y[fast] = FloatArray::from_shape({rows, D}), dx[fast] = FloatArray::from_shape({rows, D});
            mean[fast] = Array::from_shape({rows}), rstd[fast] = Array::from_shape({rows});
            dw[fast] = xt::zeros<double>({D}), db[fast] = xt::zeros<double>({D}), dw_only[fast] = xt::zeros<double>({D});
            Array db_only = xt::zeros<double>({D});
            auto* forward = fast ? xg::nn::fast::layer_norm_forward<float> : xg::nn::reference::layer_norm_forward<float>;
            auto* backward = fast ? xg::nn::fast::layer_norm_backward<float> : xg::nn::reference::layer_norm_backward<float>;
            forward(x.data(), w.data(), b.data(), y[fast].data(), mean[fast].data(), rstd[fast].data(), rows, D, 1e-5);
            backward(x.data(), g.data(), w.data(), mean[fast].data(), rstd[fast].data(), dx[fast].data(), dw[fast].data(),
                     db[fast].data(), rows, D);
            backward(x.data(), g.data(), w.data(), mean[fast].data(), rstd[fast].data(), nullptr, dw_only[fast].data(),
                     db_only.data(), rows, D);
        }
        using C = xg_test_support::FloatArithmeticConditions;
        const std::size_t K = std::max(rows, D);
        check_float_arithmetic_agrees("y " + at, y[1], y[0], C::ln_y, k.w * (1 + k.s) + k.b, D);
        check_float_arithmetic_agrees("mean " + at, mean[1], mean[0], C::ln_mean, k.sigma, D);
        check_float_arithmetic_agrees("rstd " + at, rstd[1], rstd[0], C::ln_rstd, k.rstd, D);
        check_float_arithmetic_agrees("dx " + at, dx[1], dx[0], C::ln_dx, k.rstd * k.G * (1 + k.s) * (1 + k.s), D);
        check_float_arithmetic_agrees("dw " + at, dw[1], dw[0], C::ln_dw, (1 + k.s) * k.g_column, K);
        check_float_arithmetic_agrees("db " + at, db[1], db[0], C::ln_db, k.g_column, K);
        check_float_arithmetic_agrees("dw without dx " + at, dw_only[1], dw_only[0], C::ln_dw, (1 + k.s) * k.g_column, K);
    }
}

TEST_CASE("layer_norm tiers: float32 fast kernels match the float32 reference kernels", "[tiers][layer_norm][float32]") {
    for (const auto [rows, D] : kShapes) {
        check_float32_kernels("", xg::to_float32_array(xg_test_support::random_array({rows, D}, 1, 3.0, 1.0)), rows, D);
    }
}

// Issue 40, item 3: deviations beyond 2^64 square beyond float's range; the fast kernels gave 0 and
// zero gradients there. The tiers agree on every finite input: rows at 1e19, 1e30 and FLT_MAX / 2,
// one of them constant (its float sum overflows, not its squares).
TEST_CASE("layer_norm tiers: float32 rows beyond float's range of squares agree too", "[tiers][layer_norm][float32][issue40]") {
    for (const double scale : xg_test_support::kHugeFloatScales) {
        for (const auto [rows, D] : {Shape2{6, 33}, Shape2{4, 768}}) {
            check_float32_kernels(fmt::format("x up to {:.3g}", scale), xg_test_support::huge_float_rows(rows, D, 21, scale), rows, D);
        }
    }
}

TEST_CASE("layer_norm tiers: the float32 op on either tier", "[tiers][layer_norm][float32]") {
    const Array xv = xg_test_support::random_array({6, 4, 33}, 5, 2.0, -1.0), gv = xg_test_support::random_array({6, 4, 33}, 6);
    Tensor out[2], x[2], w[2], b[2];
    for (int fast = 0; fast < 2; ++fast) {
        const xg::KernelTierGuard tier(fast ? xg::KernelTier::fast : xg::KernelTier::reference);
        x[fast] = Tensor(xv, xg::kFloat32, true);
        w[fast] = Tensor(xg_test_support::random_array({4, 33}, 7), xg::kFloat32, true);
        b[fast] = Tensor(xg_test_support::random_array({4, 33}, 8), xg::kFloat32, true);
        out[fast] = F::layer_norm(x[fast], {4, 33}, w[fast], b[fast]);
        out[fast].backward(Tensor(gv, xg::kFloat32));
    }
    // the bounds of FloatArithmeticConditions (norm_tiers.hpp), the op's 6 rows of 132; dw and db
    // are rounded to float at the end (u, which check_float_arithmetic_agrees allows the reference)
    using xg_test_support::check_float_arithmetic_agrees;
    using C = xg_test_support::FloatArithmeticConditions;
    const auto k = xg_test_support::float_arithmetic_scales(xg::to_float64_array(x[0].values<float>()), xg::to_float64_array(xg::to_float32_array(gv)),
                                                            xg::to_float64_array(w[0].values<float>()),
                                                            xg::to_float64_array(b[0].values<float>()), 6, 132, true, 1e-5);
    check_float_arithmetic_agrees("y", out[1].values<float>(), out[0].values<float>(), C::ln_y, k.w * (1 + k.s) + k.b, 132);
    check_float_arithmetic_agrees("dx", x[1].grad_values<float>(), x[0].grad_values<float>(), C::ln_dx,
                                  k.rstd * k.G * (1 + k.s) * (1 + k.s), 132);
    check_float_arithmetic_agrees("dw", w[1].grad_values<float>(), w[0].grad_values<float>(), C::ln_dw + 1, (1 + k.s) * k.g_column, 132);
    check_float_arithmetic_agrees("db", b[1].grad_values<float>(), b[0].grad_values<float>(), C::ln_db + 1, k.g_column, 132);
}

TEST_CASE("layer_norm tiers: the op on either tier, with and without weight and bias", "[tiers][layer_norm]") {
    const Array xv = xg_test_support::random_array({6, 4, 33}, 5, 2.0, -1.0), gv = xg_test_support::random_array({6, 4, 33}, 6);
    for (int affine = 0; affine < 4; ++affine) {
        const bool has_w = affine & 1, has_b = affine & 2;
        Tensor out[2], x[2], w[2], b[2];
        for (int fast = 0; fast < 2; ++fast) {
            const xg::KernelTierGuard tier(fast ? xg::KernelTier::fast : xg::KernelTier::reference);
            x[fast] = Tensor(xv, true);
            if (has_w) w[fast] = Tensor(xg_test_support::random_array({4, 33}, 7), true);
            if (has_b) b[fast] = Tensor(xg_test_support::random_array({4, 33}, 8), true);
            out[fast] = F::layer_norm(x[fast], {4, 33}, w[fast], b[fast]);
            out[fast].backward(Tensor(gv));
        }
        const std::string with = fmt::format("weight {}, bias {}", has_w, has_b);
        check_tiers_agree("y, " + with, out[1].value(), out[0].value(), 132);
        check_tiers_agree("dx, " + with, x[1].grad_value(), x[0].grad_value(), 132);
        if (has_w) check_tiers_agree("dw, " + with, w[1].grad_value(), w[0].grad_value(), 132);
        if (has_b) check_tiers_agree("db, " + with, b[1].grad_value(), b[0].grad_value(), 132);
    }
}

TEST_CASE("layer_norm tiers: the op runs the kernels of the tier it is on", "[tiers][layer_norm]") {
    const std::size_t rows = 9, D = 31;
    const Array x = xg_test_support::random_array({rows, D}, 9, 3.0, 1.0);
    const Array ones = xt::ones<double>({D}), zeros = xt::zeros<double>({D});
    for (int fast = 0; fast < 2; ++fast) {
        const xg::KernelTierGuard tier(fast ? xg::KernelTier::fast : xg::KernelTier::reference);
        Array y = Array::from_shape({rows, D}), mean = Array::from_shape({rows}), rstd = Array::from_shape({rows});
        (fast ? xg::nn::fast::layer_norm_forward<double> : xg::nn::reference::layer_norm_forward<double>)(
            x.data(), ones.data(), zeros.data(), y.data(), mean.data(), rstd.data(), rows, D, 1e-5);
        CHECK(F::layer_norm(Tensor(x), {D}).value() == y);  // bit for bit
    }
}

}  // namespace xg_test_layer_norm_tiers
