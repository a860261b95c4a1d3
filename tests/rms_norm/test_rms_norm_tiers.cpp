// `ctest -L tiers`: RMSNorm's fast kernels (nn/fast/rms_norm.cpp) against its reference kernels
// (nn/reference/rms_norm.cpp) within the tolerance of tests/support/norm_tiers.hpp, at 1 and 3
// threads; and rms_norm() on either tier, with and without weight.
#include <algorithm>
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
using xg_test_support::Shape2;

// Odd widths, a single row, a single element per row, threads' shares, and outputs of 4 MiB or more
// (streaming stores in nn/fast/).
constexpr Shape2 kShapes[] = {{1, 7}, {37, 83}, {5, 1}, {3, 2049}, {64, 768}, {128, 4100}};

// What the kernels of one tier compute for x (rows, D), in T (y, dx) and double (the rest).
template <class T>
struct Results {
    xt::xarray<T> y, dx;
    Array rrms, dw, dw_only;
};

template <class T>
Results<T> run_kernels(bool fast, const xt::xarray<T>& x, const xt::xarray<T>& g, const xt::xarray<T>& w, std::size_t rows,
                       std::size_t D) {
    Results<T> r;
    r.y = xt::xarray<T>::from_shape({rows, D}), r.rrms = Array::from_shape({rows}), r.dx = xt::xarray<T>::from_shape({rows, D});
    r.dw = xt::zeros<double>({D}), r.dw_only = xt::zeros<double>({D});
    auto* forward = fast ? xg::nn::fast::rms_norm_forward<T> : xg::nn::reference::rms_norm_forward<T>;
    auto* backward = fast ? xg::nn::fast::rms_norm_backward<T> : xg::nn::reference::rms_norm_backward<T>;
    forward(x.data(), w.data(), r.y.data(), r.rrms.data(), rows, D, 1e-6);
    backward(x.data(), g.data(), w.data(), r.rrms.data(), r.dx.data(), r.dw.data(), rows, D);
    backward(x.data(), g.data(), w.data(), r.rrms.data(), nullptr, r.dw_only.data(), rows, D);
    return r;
}

TEST_CASE("rms_norm tiers: fast kernels match the reference kernels", "[tiers][rms_norm]") {
    for (const Shape2& shape : kShapes) {
        const std::size_t rows = shape.rows, D = shape.D;
        const Array x = xg_test_support::random_array({rows, D}, 11, 3.0, 1.0), g = xg_test_support::random_array({rows, D}, 12);
        const Array w = xg_test_support::random_array({D}, 13);
        xg_test_support::compare_kernel_tiers(
            fmt::format("({}, {})", rows, D), [&](bool fast) { return run_kernels<double>(fast, x, g, w, rows, D); },
            [&](const Results<double>& fast, const Results<double>& reference, const std::string& at) {
                check_tiers_agree("y " + at, fast.y, reference.y, D);
                check_tiers_agree("rrms " + at, fast.rrms, reference.rrms, D);
                check_tiers_agree("dx " + at, fast.dx, reference.dx, D, xg_test_support::dx_magnitude(w, reference.rrms, g));
                check_tiers_agree("dw " + at, fast.dw, reference.dw, std::max(rows, D));
                check_tiers_agree("dw without dx " + at, fast.dw_only, reference.dw_only, std::max(rows, D));
            });
    }
}

// The float32 kernels of both tiers on x (rows, D), at 1 and 3 threads, against the bounds of
// FloatArithmeticConditions (norm_tiers.hpp): the fast kernels compute in float.
void check_float32_kernels(const std::string& what, const xg::FloatArray& x, std::size_t rows, std::size_t D) {
    using xg::FloatArray;
    using xg_test_support::check_float_arithmetic_agrees;
    const FloatArray g = xg::to_float32_array(xg_test_support::random_array({rows, D}, 12));
    const FloatArray w = xg::to_float32_array(xg_test_support::random_array({D}, 13));
    const auto k = xg_test_support::float_arithmetic_scales(xg::to_float64_array(x), xg::to_float64_array(g), xg::to_float64_array(w),
                                                            Array(), rows, D, false, 1e-6);
    xg_test_support::compare_kernel_tiers(
        fmt::format("{} ({}, {})", what, rows, D), [&](bool fast) { return run_kernels<float>(fast, x, g, w, rows, D); },
        [&](const Results<float>& fast, const Results<float>& reference, const std::string& at) {
            using C = xg_test_support::FloatArithmeticConditions;
            const std::size_t K = std::max(rows, D);
            check_float_arithmetic_agrees("y " + at, fast.y, reference.y, C::rms_y, k.w * k.s, D);
            check_float_arithmetic_agrees("rrms " + at, fast.rrms, reference.rrms, C::rms_rrms, k.rstd, D);
            check_float_arithmetic_agrees("dx " + at, fast.dx, reference.dx, C::rms_dx, k.rstd * k.G * (1 + k.s * k.s), D);
            check_float_arithmetic_agrees("dw " + at, fast.dw, reference.dw, C::rms_dw, k.s * k.g_column, K);
            check_float_arithmetic_agrees("dw without dx " + at, fast.dw_only, reference.dw_only, C::rms_dw, k.s * k.g_column, K);
        });
}

TEST_CASE("rms_norm tiers: float32 fast kernels match the float32 reference kernels", "[tiers][rms_norm][float32]") {
    for (const Shape2& shape : kShapes) {
        check_float32_kernels("", xg::to_float32_array(xg_test_support::random_array({shape.rows, shape.D}, 11, 3.0, 1.0)), shape.rows,
                              shape.D);
    }
}

// Issue 40, item 3: values beyond 2^64 square beyond float's range; the fast kernels gave 0 and zero
// gradients there. The tiers agree on every finite input: rows at 1e19, 1e30 and FLT_MAX / 2.
TEST_CASE("rms_norm tiers: float32 rows beyond float's range of squares agree too", "[tiers][rms_norm][float32][issue40]") {
    xg_test_support::on_huge_float_rows({{6, 33}, {4, 768}}, 22, check_float32_kernels);
}

TEST_CASE("rms_norm tiers: the float32 op on either tier", "[tiers][rms_norm][float32]") {
    const Array xv = xg_test_support::random_array({6, 4, 33}, 15, 2.0, -1.0), gv = xg_test_support::random_array({6, 4, 33}, 16);
    Tensor out[2], x[2], w[2];
    xg_test_support::on_each_tier([&](int fast) {
        x[fast] = Tensor(xv, xg::kFloat32, true);
        w[fast] = Tensor(xg_test_support::random_array({4, 33}, 17), xg::kFloat32, true);
        out[fast] = F::rms_norm(x[fast], {4, 33}, w[fast]);
        out[fast].backward(Tensor(gv, xg::kFloat32));
    });
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
        xg_test_support::on_each_tier([&](int fast) {
            x[fast] = Tensor(xv, true);
            if (has_w) w[fast] = Tensor(xg_test_support::random_array({4, 33}, 17), true);
            out[fast] = F::rms_norm(x[fast], {4, 33}, w[fast]);
            out[fast].backward(Tensor(gv));
        });
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
    xg_test_support::on_each_tier([&](int fast) {
        Array y = Array::from_shape({rows, D}), rrms = Array::from_shape({rows});
        (fast ? xg::nn::fast::rms_norm_forward<double> : xg::nn::reference::rms_norm_forward<double>)(x.data(), ones.data(), y.data(),
                                                                                                      rrms.data(), rows, D, 1e-6);
        CHECK(F::rms_norm(Tensor(x), {D}).value() == y);  // bit for bit
    });
}

}  // namespace xg_test_rms_norm_tiers
