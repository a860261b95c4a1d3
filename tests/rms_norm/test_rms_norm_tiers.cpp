// `ctest -L tiers`: RMSNorm's fast kernels (nn/fast/rms_norm.cpp) against its reference kernels
// (nn/reference/rms_norm.cpp) within the tolerance of tests/support/norm_tiers.hpp, at 1 and 3
// threads; and rms_norm() on either tier, with and without weight.
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/engine/kernel_tier.hpp"
#include "nn/fast/rms_norm.hpp"
#include "nn/functional/functional.hpp"
#include "nn/reference/rms_norm.hpp"
#include "tests/support/norm_tiers.hpp"

namespace xg_test_rms_norm_tiers {

namespace F = xg::nn::functional;
using xg::Array;
using xg::Tensor;
using xg_test_support::check_tiers_agree;

struct Shape2 {
    std::size_t rows, D;
};

// Odd widths, a single row, a single element per row, threads' shares, and outputs of 4 MiB or more
// (streaming stores in nn/fast/).
constexpr Shape2 kShapes[] = {{1, 7}, {37, 83}, {5, 1}, {3, 2049}, {64, 768}, {128, 4100}};

TEST_CASE("rms_norm tiers: fast kernels match the reference kernels", "[tiers][rms_norm]") {
    xg_test_support::ThreadCountGuard restore;
    for (const auto [rows, D] : kShapes) {
        const Array x = xg_test_support::random_array({rows, D}, 11, 3.0, 1.0), g = xg_test_support::random_array({rows, D}, 12);
        const Array w = xg_test_support::random_array({D}, 13);
        for (int threads : xg_test_support::kTierThreadCounts) {
            xg::set_num_threads(threads);
            const std::string at = fmt::format("({}, {}) at {} threads", rows, D, threads);
            Array y[2], rrms[2], dx[2], dw[2], dw_only[2];
            for (int fast = 0; fast < 2; ++fast) {
                y[fast] = Array::from_shape({rows, D}), rrms[fast] = Array::from_shape({rows}), dx[fast] = Array::from_shape({rows, D});
                dw[fast] = xt::zeros<double>({D}), dw_only[fast] = xt::zeros<double>({D});
                auto* forward = fast ? xg::nn::fast::rms_norm_forward<double> : xg::nn::reference::rms_norm_forward<double>;
                auto* backward = fast ? xg::nn::fast::rms_norm_backward<double> : xg::nn::reference::rms_norm_backward<double>;
                forward(x.data(), w.data(), y[fast].data(), rrms[fast].data(), rows, D, 1e-6);
                backward(x.data(), g.data(), w.data(), rrms[fast].data(), dx[fast].data(), dw[fast].data(), rows, D);
                backward(x.data(), g.data(), w.data(), rrms[fast].data(), nullptr, dw_only[fast].data(), rows, D);
            }
            check_tiers_agree("y " + at, y[1], y[0], D);
            check_tiers_agree("rrms " + at, rrms[1], rrms[0], D);
            check_tiers_agree("dx " + at, dx[1], dx[0], D, xg_test_support::dx_magnitude(w, rrms[0], g));
            check_tiers_agree("dw " + at, dw[1], dw[0], std::max(rows, D));
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
    const FloatArray g = xg::to_float32_array(xg_test_support::random_array({rows, D}, 12));
    const FloatArray w = xg::to_float32_array(xg_test_support::random_array({D}, 13));
    const auto k = xg_test_support::float_arithmetic_scales(xg::to_float64_array(x), xg::to_float64_array(g), xg::to_float64_array(w),
                                                            Array(), rows, D, false, 1e-6);
    for (int threads : xg_test_support::kTierThreadCounts) {
        xg::set_num_threads(threads);
        const std::string at = fmt::format("{} ({}, {}) at {} threads", what, rows, D, threads);
        FloatArray y[2], dx[2];
        Array rrms[2], dw[2], dw_only[2];
        for (int fast = 0; fast < 2; ++fast) {
            y[fast] = FloatArray::from_shape({rows, D}), dx[fast] = FloatArray::from_shape({rows, D});
            rrms[fast] = Array::from_shape({rows});
            dw[fast] = xt::zeros<double>({D}), dw_only[fast] = xt::zeros<double>({D});
            auto* forward = fast ? xg::nn::fast::rms_norm_forward<float> : xg::nn::reference::rms_norm_forward<float>;
            auto* backward = fast ? xg::nn::fast::rms_norm_backward<float> : xg::nn::reference::rms_norm_backward<float>;
            forward(x.data(), w.data(), y[fast].data(), rrms[fast].data(), rows, D, 1e-6);
            backward(x.data(), g.data(), w.data(), rrms[fast].data(), dx[fast].data(), dw[fast].data(), rows, D);
            backward(x.data(), g.data(), w.data(), rrms[fast].data(), nullptr, dw_only[fast].data(), rows, D);
        }
        using C = xg_test_support::FloatArithmeticConditions;
        const std::size_t K = std::max(rows, D);
        check_float_arithmetic_agrees("y " + at, y[1], y[0], C::rms_y, k.w * k.s, D);
        check_float_arithmetic_agrees("rrms " + at, rrms[1], rrms[0], C::rms_rrms, k.rstd, D);
        check_float_arithmetic_agrees("dx " + at, dx[1], dx[0], C::rms_dx, k.rstd * k.G * (1 + k.s * k.s), D);
        check_float_arithmetic_agrees("dw " + at, dw[1], dw[0], C::rms_dw, k.s * k.g_column, K);
        check_float_arithmetic_agrees("dw without dx " + at, dw_only[1], dw_only[0], C::rms_dw, k.s * k.g_column, K);
    }
}

TEST_CASE("rms_norm tiers: float32 fast kernels match the float32 reference kernels", "[tiers][rms_norm][float32]") {
    for (const auto [rows, D] : kShapes) {
        check_float32_kernels("", xg::to_float32_array(xg_test_support::random_array({rows, D}, 11, 3.0, 1.0)), rows, D);
    }
}

// Issue 40, item 3: values beyond 2^64 square beyond float's range; the fast kernels gave 0 and zero
// gradients there. The tiers agree on every finite input: rows at 1e19, 1e30 and FLT_MAX / 2.
TEST_CASE("rms_norm tiers: float32 rows beyond float's range of squares agree too", "[tiers][rms_norm][float32][issue40]") {
    for (const double scale : xg_test_support::kHugeFloatScales) {
        for (const auto [rows, D] : {Shape2{6, 33}, Shape2{4, 768}}) {
            check_float32_kernels(fmt::format("x up to {:.3g}", scale), xg_test_support::huge_float_rows(rows, D, 22, scale), rows, D);
        }
    }
}

TEST_CASE("rms_norm tiers: the float32 op on either tier", "[tiers][rms_norm][float32]") {
    const Array xv = xg_test_support::random_array({6, 4, 33}, 15, 2.0, -1.0), gv = xg_test_support::random_array({6, 4, 33}, 16);
    Tensor out[2], x[2], w[2];
    for (int fast = 0; fast < 2; ++fast) {
        const xg::KernelTierGuard tier(fast ? xg::KernelTier::fast : xg::KernelTier::reference);
        x[fast] = Tensor(xv, xg::kFloat32, true);
        w[fast] = Tensor(xg_test_support::random_array({4, 33}, 17), xg::kFloat32, true);
        out[fast] = F::rms_norm(x[fast], {4, 33}, w[fast]);
        out[fast].backward(Tensor(gv, xg::kFloat32));
    }
    // the bounds of FloatArithmeticConditions (norm_tiers.hpp), the op's 6 rows of 132; dw is rounded
    // to float at the end (u more)
    using xg_test_support::check_float_arithmetic_agrees;
    using C = xg_test_support::FloatArithmeticConditions;
    const auto k = xg_test_support::float_arithmetic_scales(xg::to_float64_array(x[0].values<float>()), xg::to_float64_array(xg::to_float32_array(gv)),
                                                            xg::to_float64_array(w[0].values<float>()), Array(), 6, 132, false, 1e-6);
    check_float_arithmetic_agrees("y", out[1].values<float>(), out[0].values<float>(), C::rms_y, k.w * k.s, 132);
    check_float_arithmetic_agrees("dx", x[1].grad_values<float>(), x[0].grad_values<float>(), C::rms_dx, k.rstd * k.G * (1 + k.s * k.s), 132);
    check_float_arithmetic_agrees("dw", w[1].grad_values<float>(), w[0].grad_values<float>(), C::rms_dw + 1, k.s * k.g_column, 132);
}

TEST_CASE("rms_norm tiers: the op on either tier, with and without weight", "[tiers][rms_norm]") {
    const Array xv = xg_test_support::random_array({6, 4, 33}, 15, 2.0, -1.0), gv = xg_test_support::random_array({6, 4, 33}, 16);
    for (int has_w = 0; has_w < 2; ++has_w) {
        Tensor out[2], x[2], w[2];
        for (int fast = 0; fast < 2; ++fast) {
            const xg::KernelTierGuard tier(fast ? xg::KernelTier::fast : xg::KernelTier::reference);
            x[fast] = Tensor(xv, true);
            if (has_w) w[fast] = Tensor(xg_test_support::random_array({4, 33}, 17), true);
            out[fast] = F::rms_norm(x[fast], {4, 33}, w[fast]);
            out[fast].backward(Tensor(gv));
        }
        const std::string with = fmt::format("weight {}", has_w);
        check_tiers_agree("y, " + with, out[1].value(), out[0].value(), 132);
        check_tiers_agree("dx, " + with, x[1].grad_value(), x[0].grad_value(), 132);
        if (has_w) check_tiers_agree("dw, " + with, w[1].grad_value(), w[0].grad_value(), 132);
    }
}

TEST_CASE("rms_norm tiers: the op runs the kernels of the tier it is on", "[tiers][rms_norm]") {
    const std::size_t rows = 9, D = 31;
    const Array x = xg_test_support::random_array({rows, D}, 19, 3.0, 1.0);
    const Array ones = xt::ones<double>({D});
    for (int fast = 0; fast < 2; ++fast) {
        const xg::KernelTierGuard tier(fast ? xg::KernelTier::fast : xg::KernelTier::reference);
        Array y = Array::from_shape({rows, D}), rrms = Array::from_shape({rows});
        (fast ? xg::nn::fast::rms_norm_forward<double> : xg::nn::reference::rms_norm_forward<double>)(x.data(), ones.data(), y.data(), rrms.data(),
                                                                                      rows, D, 1e-6);
        CHECK(F::rms_norm(Tensor(x), {D}).value() == y);  // bit for bit
    }
}

}  // namespace xg_test_rms_norm_tiers
