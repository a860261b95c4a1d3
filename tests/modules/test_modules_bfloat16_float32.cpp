// `ctest -L float32`: bfloat16 storage end to end (issue 41). The storage type rounds once to
// nearest even; Linear, LayerNorm, RMSNorm, GELU and an MLP training step run on bfloat16
// tensors natively (no float64 mirror of an input) and land within the derived bounds of
// tests/support/bfloat16_bounds.hpp of the float64 run on the same values, on both kernel tiers.
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "tests/support/bfloat16_bounds.hpp"
#include "tests/support/float32_nn_twins.hpp"

namespace xg_test_modules_bfloat16_float32 {

using xg::Array;
using xg::bfloat16;
using xg::Shape;
using xg::Tensor;
using xg::test::abs_product_t;
using xg::test::bf16_values;
using xg::test::kBf16U;
using xg::test::kFloatU;
using xg::test::transposed;
using xg::test::worst_ratio;
namespace F = xg::nn::functional;

// got (a bfloat16 tensor's values) within `bound` of want, elementwise; the ratio is printed.
void check_within(const std::string& what, const Tensor& got, const Array& want, const Array& bound) {
    REQUIRE(got.dtype() == xg::kBFloat16);
    REQUIRE(got.shape() == xg::shape_of(want));
    const Array values = xg::to_float64_array(got.values<bfloat16>());
    const double ratio = worst_ratio(values, want, bound);
    UNSCOPED_INFO(fmt::format("{}: largest error / bound = {:.3f}", what, ratio));
    CHECK(ratio <= 1.0);
    WARN(fmt::format("{}: largest error / derived bound = {:.3f}", what, ratio));
}

// The gradient of a bfloat16 leaf, as its bfloat16 storage holds it.
Tensor grad_of(const Tensor& leaf) {
    REQUIRE(leaf.has_grad());
    REQUIRE(leaf.grad().dtype() == xg::kBFloat16);
    return leaf.grad();
}

// No float64 mirror of a bfloat16 tensor was made: the op read its storage as it is.
void check_no_mirror(const Tensor& t) { CHECK(t.node()->value_mirror == xg::Node::Mirror::None); }

Tensor bf16_leaf(const Array& values) { return Tensor(values, xg::kBFloat16, true); }
Tensor f64_leaf(const Array& values) { return Tensor(values, xg::kFloat64, true); }

TEST_CASE("bfloat16 stores round once to nearest, ties to even, from float and from double", "[float32][bfloat16]") {
    CHECK(bfloat16(1.0f).bits == 0x3F80);
    CHECK(static_cast<float>(bfloat16::from_bits(0x3F81)) == 1.0f + 0x1p-7f);
    CHECK(bfloat16(1.0f + 0x1p-8f).bits == 0x3F80);         // a tie: to the even neighbour, 1
    CHECK(bfloat16(1.0f + 3 * 0x1p-8f).bits == 0x3F82);     // a tie: to the even neighbour, 1 + 2^-6
    CHECK(bfloat16(1.0f + 0x1p-8f + 0x1p-20f).bits == 0x3F81);  // above the tie
    // Straight from double in one rounding: through float first, 1 + 2^-8 + 2^-40 would become the
    // tie 1 + 2^-8 and then 1; it is above the tie, so 1 + 2^-7.
    CHECK(bfloat16(1.0 + 0x1p-8 + 0x1p-40).bits == 0x3F81);
    CHECK(bfloat16(-(1.0 + 0x1p-8 + 0x1p-40)).bits == 0xBF81);
    CHECK(bfloat16(1.0 + 0x1p-8).bits == 0x3F80);
    CHECK(std::isinf(static_cast<float>(bfloat16(3.4e38))));  // beyond max + half an ulp
    CHECK(static_cast<float>(bfloat16(3.39e38)) == static_cast<float>(std::numeric_limits<bfloat16>::max()));
    CHECK(std::isnan(static_cast<float>(bfloat16(std::nan("")))));
    CHECK(bfloat16(-0.0).bits == 0x8000);
    CHECK(static_cast<float>(-std::numeric_limits<bfloat16>::infinity()) == -std::numeric_limits<float>::infinity());
    // Every value widens exactly: storing it again gives its bits back.
    for (std::uint32_t b = 0; b < 0x10000; ++b) {
        const bfloat16 h = bfloat16::from_bits(static_cast<std::uint16_t>(b));
        const float f = static_cast<float>(h);
        if (std::isnan(f)) continue;
        REQUIRE(bfloat16(f).bits == b);
        REQUIRE(bfloat16(static_cast<double>(f)).bits == b);
    }
}

TEST_CASE("a bfloat16 tensor keeps bfloat16 storage, promotes as PyTorch and converts both ways", "[float32][bfloat16]") {
    const Tensor t(Array{1.0, 1.0 + 0x1p-8 + 0x1p-40, -3.0}, xg::kBFloat16, true);
    CHECK(std::string(xg::dtype_name(t.dtype())) == "bfloat16");
    CHECK(t.values<bfloat16>()(1).bits == 0x3F81);
    CHECK(t.value()(1) == 1.0 + 0x1p-7);
    CHECK_THROWS_WITH(t.values<float>(), Catch::Contains("bfloat16"));
    CHECK(xg::promote_types(xg::kBFloat16, xg::kFloat32) == xg::kFloat32);
    CHECK(xg::promote_types(xg::kBFloat16, xg::kFloat64) == xg::kFloat64);
    CHECK(xg::promote_types(xg::kBFloat16, xg::kBFloat16) == xg::kBFloat16);
    CHECK(xg::unit_roundoff(xg::kBFloat16) == kBf16U);

    const Tensor f = t.to(xg::kFloat32);
    CHECK(f.dtype() == xg::kFloat32);
    xg::sum(xg::mul(f, f)).backward();
    CHECK(grad_of(t).value() == Array{2.0, 2.0 + 0x1p-6, -6.0});

    const Tensor mixed = xg::add(Tensor(Array{1.0, 2.0}, xg::kBFloat16), Tensor(Array{0.5, 0.25}, xg::kFloat32));
    CHECK(mixed.dtype() == xg::kFloat32);
    CHECK(mixed.value() == Array{1.5, 2.25});
}

TEST_CASE("bfloat16 Linear: within the derived bound of float64, forward and backward", "[float32][bfloat16]") {
    const std::size_t N = 16, K = 48, O = 24;
    const Array x = bf16_values({N, K}, 11), w = bf16_values({O, K}, 12, 0.2), b = bf16_values({O}, 13, 0.5);
    const Array g = bf16_values({N, O}, 14);
    const Tensor x64 = f64_leaf(x), w64 = f64_leaf(w), b64 = f64_leaf(b);
    const Tensor y64 = F::linear(x64, w64, b64);
    y64.backward(Tensor(g));
    const Tensor xb = bf16_leaf(x), wb = bf16_leaf(w), bb = bf16_leaf(b);
    const Tensor yb = F::linear(xb, wb, bb);
    yb.backward(Tensor(g, xg::kBFloat16));

    // y: K products and the bias summed in float (gamma_{K+1}), then stored
    const Array terms_y = abs_product_t(x, w) + xt::abs(b);
    check_within("linear y", yb, y64.value(), kBf16U * xt::abs(y64.value()) + (K + 2) * kFloatU * terms_y);
    // dx = g W (O terms), dW = g^T x (N terms), db = sum of g over rows (in double)
    check_within("linear dx", grad_of(xb), x64.grad().value(),
                 kBf16U * xt::abs(x64.grad().value()) + (O + 2) * kFloatU * abs_product_t(g, transposed(w)));
    check_within("linear dW", grad_of(wb), w64.grad().value(),
                 kBf16U * xt::abs(w64.grad().value()) + (N + 2) * kFloatU * abs_product_t(transposed(g), transposed(x)));
    check_within("linear db", grad_of(bb), b64.grad().value(),
                 kBf16U * xt::abs(b64.grad().value()) + (N + 2) * kFloatU * Array(xt::sum(xt::abs(g), {0})));
    check_no_mirror(xb), check_no_mirror(wb), check_no_mirror(bb);
}

// LayerNorm (with_mean) or RMSNorm (without) on rows of D values; the float arithmetic of the fast
// tier loses (D + 6) kappa^2 u_f to the row statistics (tests/support/float32_bound.hpp), the
// backward twice that over its two row sums.
void check_norm(bool with_mean) {
    const std::size_t R = 12, D = 40;
    const std::string name = with_mean ? "layer_norm" : "rms_norm";
    const Array x = bf16_values({R, D}, 21, 1.5, 0.5), w = bf16_values({D}, 22, 0.3, 1.0), b = bf16_values({D}, 23, 0.2);
    const Array g = bf16_values({R, D}, 24);
    const auto run = [&](const Tensor& xt, const Tensor& wt, const Tensor& bt) {
        return with_mean ? F::layer_norm(xt, {D}, wt, bt, 1e-5) : F::rms_norm(xt, {D}, wt, 1e-5);
    };
    const Tensor x64 = f64_leaf(x), w64 = f64_leaf(w), b64 = f64_leaf(b);
    const Tensor y64 = run(x64, w64, b64);
    y64.backward(Tensor(g));
    const Tensor xb = bf16_leaf(x), wb = bf16_leaf(w), bb = bf16_leaf(b);
    const Tensor yb = run(xb, wb, bb);
    yb.backward(Tensor(g, xg::kBFloat16));

    // the exact row statistics, x-hat and the terms' magnitudes
    Array xhat = Array::from_shape({R, D}), rstd = Array::from_shape({R});
    double kappa2 = 1.0;
    for (std::size_t r = 0; r < R; ++r) {
        double mean = 0.0, ms = 0.0;
        for (std::size_t j = 0; j < D; ++j) mean += x(r, j) / D;
        for (std::size_t j = 0; j < D; ++j) ms += (with_mean ? (x(r, j) - mean) * (x(r, j) - mean) : x(r, j) * x(r, j)) / D;
        rstd(r) = 1.0 / std::sqrt(ms + 1e-5);
        if (with_mean) kappa2 = std::max(kappa2, 1.0 + mean * mean / ms);
        for (std::size_t j = 0; j < D; ++j) xhat(r, j) = ((with_mean ? x(r, j) - mean : x(r, j))) * rstd(r);
    }
    const double stats = (D + 8) * kappa2 * kFloatU;
    Array y_terms = xt::abs(xhat) * xt::abs(w);
    if (with_mean) y_terms += xt::abs(b);
    check_within(name + " y", yb, y64.value(), kBf16U * xt::abs(y64.value()) + stats * y_terms);

    // dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)), dxhat = g w
    Array dx_terms = Array::from_shape({R, D});
    for (std::size_t r = 0; r < R; ++r) {
        double mean_abs = 0.0, mean_abs_xhat = 0.0;
        for (std::size_t j = 0; j < D; ++j) {
            mean_abs += std::fabs(g(r, j) * w(j)) / D;
            mean_abs_xhat += std::fabs(g(r, j) * w(j) * xhat(r, j)) / D;
        }
        for (std::size_t j = 0; j < D; ++j) {
            dx_terms(r, j) = rstd(r) * (std::fabs(g(r, j) * w(j)) + (with_mean ? mean_abs : 0.0) + std::fabs(xhat(r, j)) * mean_abs_xhat);
        }
    }
    check_within(name + " dx", grad_of(xb), x64.grad().value(), kBf16U * xt::abs(x64.grad().value()) + 2 * stats * dx_terms);
    // dw = sum over rows of g xhat (R terms, each with x-hat's error)
    const Array dw_terms = xt::sum(xt::abs(g) * xt::abs(xhat), {0});
    check_within(name + " dw", grad_of(wb), w64.grad().value(),
                 kBf16U * xt::abs(w64.grad().value()) + (stats + (R + 2) * kFloatU) * dw_terms);
    if (with_mean) {
        check_within(name + " db", grad_of(bb), b64.grad().value(),
                     kBf16U * xt::abs(b64.grad().value()) + (R + 2) * kFloatU * Array(xt::sum(xt::abs(g), {0})));
    }
    check_no_mirror(xb), check_no_mirror(wb);
}

TEST_CASE("bfloat16 LayerNorm and RMSNorm: within the derived bound of float64, forward and backward", "[float32][bfloat16]") {
    SECTION("layer_norm") { check_norm(true); }
    SECTION("rms_norm") { check_norm(false); }
}

TEST_CASE("bfloat16 GELU, exact and tanh: within the derived bound of float64, forward and backward", "[float32][bfloat16]") {
    const Array x = bf16_values({64, 8}, 31, 2.5), g = bf16_values({64, 8}, 32);
    for (const auto approximate : {F::GeluApproximate::none, F::GeluApproximate::tanh}) {
        const bool exact = approximate == F::GeluApproximate::none;
        const Tensor x64 = f64_leaf(x), xb = bf16_leaf(x);
        const Tensor y64 = F::gelu(x64, approximate), yb = F::gelu(xb, approximate);
        y64.backward(Tensor(g));
        yb.backward(Tensor(g, xg::kBFloat16));
        Array y_terms = Array::from_shape(x.shape()), dx_terms = Array::from_shape(x.shape());
        for (std::size_t i = 0; i < x.size(); ++i) {
            const double v = x.data()[i], gi = std::fabs(g.data()[i]);
            if (exact) {
                // y = x Phi(x), erfc to a few ulps; dx = g (Phi + x phi), Phi read back as y / x
                // from the stored (rounded) y: one u_b of Phi more
                y_terms.data()[i] = 8 * kFloatU * std::fabs(v * xg::test::normal_cdf(v));
                dx_terms.data()[i] = (kBf16U + 8 * kFloatU) * gi * (xg::test::normal_cdf(v) + std::fabs(v) * xg::test::normal_pdf(v));
            } else {
                // y = x (1 + t) / 2 with t = tanh(u): 1 + t cancels for x < 0, so its terms count
                const double u = 0.79788456080286535588 * (v + 0.044715 * v * v * v), t = std::tanh(u);
                y_terms.data()[i] = 8 * kFloatU * 0.5 * std::fabs(v) * (1.0 + std::fabs(t));
                dx_terms.data()[i] = 16 * kFloatU * gi *
                                     (0.5 * (1.0 + std::fabs(t)) +
                                      0.5 * std::fabs(v) * (1.0 + t * t) * 0.8 * (1.0 + 3 * 0.044715 * v * v) * (1.0 + std::fabs(u)));
            }
        }
        const std::string name = exact ? "gelu" : "gelu tanh";
        check_within(name + " y", yb, y64.value(), kBf16U * xt::abs(y64.value()) + y_terms);
        check_within(name + " dx", grad_of(xb), x64.grad().value(), kBf16U * xt::abs(x64.grad().value()) + dx_terms);
        check_no_mirror(xb);
    }
}

// One SGD step of Linear -> GELU -> Linear with mse_loss, in bfloat16 and in float64 from the same
// values. The bounds follow the errors through the step (each op: its store, its float sums, and
// its inputs' errors times its derivative's magnitude), elementwise.
TEST_CASE("a bfloat16 MLP training step: within the derived bound of the float64 step", "[float32][bfloat16]") {
    const std::size_t N = 16, D = 12, H = 32, O = 8;
    const double lr = 0.25;
    const Array x = bf16_values({N, D}, 41), t = bf16_values({N, O}, 42);
    const Array w1 = bf16_values({H, D}, 43, 0.3), b1 = bf16_values({H}, 44, 0.1);
    const Array w2 = bf16_values({O, H}, 45, 0.2), b2 = bf16_values({O}, 46, 0.1);

    const auto step = [&](xg::Dtype dtype) {
        std::vector<Tensor> params{Tensor(w1, dtype, true), Tensor(b1, dtype, true), Tensor(w2, dtype, true), Tensor(b2, dtype, true)};
        xg::optim::SGD sgd(params, xg::optim::SGDOptions(lr));
        const Tensor h = F::gelu(F::linear(Tensor(x, dtype), params[0], params[1]));
        const Tensor loss = F::mse_loss(F::linear(h, params[2], params[3]), Tensor(t, dtype));
        REQUIRE(loss.dtype() == dtype);
        sgd.zero_grad();
        loss.backward();
        std::vector<Tensor> grads;
        for (const Tensor& p : params) grads.push_back(p.grad());
        sgd.step();
        return std::pair{params, grads};
    };
    const auto [p64, g64] = step(xg::kFloat64);
    const auto [pb, gb] = step(xg::kBFloat16);

    // forward: z1 = x W1^T + b1, h = gelu(z1), z2 = h W2^T + b2 (exact values from float64)
    const Array z1 = xg::test::product_t(x, w1) + b1;
    const Array h = F::gelu(Tensor(z1)).value();
    const Array z2 = xg::test::product_t(h, w2) + b2;
    const double gelu_slope = 1.13, gelu_curvature = 0.8;  // max |gelu'| and max |gelu''|
    const Array e_z1 = kBf16U * xt::abs(z1) + (D + 2) * kFloatU * (abs_product_t(x, w1) + xt::abs(b1));
    const Array e_h = (kBf16U + 8 * kFloatU) * xt::abs(h) + gelu_slope * e_z1;
    const Array e_z2 = kBf16U * xt::abs(z2) + (H + 2) * kFloatU * (abs_product_t(h, w2) + xt::abs(b2)) + abs_product_t(e_h, w2);
    // backward: g2 = dL/dz2 = 2 (z2 - t) / (N O): the difference and its scalings each stored once
    const double scale = 2.0 / static_cast<double>(N * O);
    const Array g2 = scale * (z2 - t);
    const Array e_g2 = scale * (e_z2 + kBf16U * xt::abs(z2 - t)) + 3 * kBf16U * xt::abs(g2);
    const Array dh = xg::test::product_t(g2, transposed(w2));
    const Array e_dh = kBf16U * xt::abs(dh) + (O + 2) * kFloatU * abs_product_t(g2, transposed(w2)) + abs_product_t(e_g2, transposed(w2));
    Array dz1 = Array::from_shape(z1.shape()), e_dz1 = Array::from_shape(z1.shape());
    for (std::size_t i = 0; i < z1.size(); ++i) {
        const double v = z1.data()[i], slope = xg::test::normal_cdf(v) + v * xg::test::normal_pdf(v);
        dz1.data()[i] = dh.data()[i] * slope;
        e_dz1.data()[i] = kBf16U * std::fabs(dz1.data()[i]) + e_dh.data()[i] * std::fabs(slope) +
                          std::fabs(dh.data()[i]) * (gelu_curvature * e_z1.data()[i] + (kBf16U + 8 * kFloatU) * (std::fabs(slope) + 1.0));
    }
    // the parameters' gradients and the step w' = w - lr dw, stored once
    const Array gw1 = g64[0].value(), gb1 = g64[1].value(), gw2 = g64[2].value(), gb2 = g64[3].value();
    const std::vector<Array> grad_bounds{
        kBf16U * xt::abs(gw1) + (N + 2) * kFloatU * abs_product_t(transposed(dz1), transposed(x)) + abs_product_t(transposed(e_dz1), transposed(xt::abs(x))),
        kBf16U * xt::abs(gb1) + Array(xt::sum(e_dz1, {0})) + (N + 2) * kFloatU * Array(xt::sum(xt::abs(dz1), {0})),
        kBf16U * xt::abs(gw2) + (N + 2) * kFloatU * abs_product_t(transposed(g2), transposed(h)) +
            abs_product_t(transposed(e_g2), transposed(xt::abs(h))) + abs_product_t(transposed(xt::abs(g2)), transposed(e_h)),
        kBf16U * xt::abs(gb2) + Array(xt::sum(e_g2, {0})) + (N + 2) * kFloatU * Array(xt::sum(xt::abs(g2), {0})),
    };
    const char* names[] = {"W1", "b1", "W2", "b2"};
    for (std::size_t k = 0; k < 4; ++k) {
        check_within(fmt::format("mlp d{}", names[k]), gb[k], g64[k].value(), grad_bounds[k]);
        check_within(fmt::format("mlp step {}", names[k]), pb[k], p64[k].value(),
                     kBf16U * xt::abs(p64[k].value()) + lr * grad_bounds[k]);
    }
}

// Every nn twin of the float32 suite (tests/support/float32_nn_twins.hpp), run in bfloat16 on both
// tiers within its own condition in units of bfloat16's u = 2^-8. The twins' conditions count the
// input roundings (amplified by the op's condition) and the stores, with the arithmetic between
// stores negligible; in bfloat16 the arithmetic between stores is double or float (the fast tier's
// float rows, sgemm), whose gamma_n u_f = n 2^-24 is below 2 % of u_b for the twins' n <= 300, so the
// same counts bound the bfloat16 errors in units of u_b. The inputs are bfloat16 numbers, held
// exactly by both runs (as in the bounds above): rounding N(0, 1) inputs to 8 bits makes ties and
// swaps within max pooling's windows, where the gradient jumps (the float64 run at the unrounded
// inputs picks another element: err/tol 23-46), which no condition number bounds.
TEST_CASE("bfloat16 twins of nn/: every module and functional within its condition in units of bfloat16's u",
          "[float32][bfloat16]") {
    for (const auto& [area, make] : xg_test_support::nn_twin_registry()) {
        for (const xg::KernelTier tier : {xg::KernelTier::reference, xg::KernelTier::fast}) {
            const xg::KernelTierGuard guard(tier);
            const char* tier_name = tier == xg::KernelTier::reference ? "reference" : "fast";
            for (const xg_test_support::NnTwin& t : make()) {
                std::vector<Tensor> on_grid;  // the inputs rounded to bfloat16 numbers, float64 leaves as before
                for (const Tensor& x : t.inputs64) {
                    on_grid.emplace_back(xg::to_float64_array(xg::round_to_storage<bfloat16>(x.value())), xg::kFloat64, x.requires_grad());
                }
                xg::test::check_narrow_twin(xg::kBFloat16, area + ": " + t.name + " [" + tier_name + "]", t.f, on_grid, t.condition,
                                            xg::test::TwinNorm::normwise);
            }
        }
    }
    REQUIRE(xg_test_support::nn_twin_registry().size() >= 11);
}

}  // namespace xg_test_modules_bfloat16_float32

namespace xg_test_modules_bfloat16_float32 {

// Adding bfloat16 touched the dtype list (the engine) and the kernels that need float arithmetic
// or a float accumulator for it, nothing else: every op written as a template on its storage
// type took the new type as it was. A file that starts naming bfloat16 is a special case; list it
// here with its reason, or write it as a template.
TEST_CASE("bfloat16 storage: the files that name it are the dtype list and the kernels that need float arithmetic",
          "[float32][bfloat16]") {
    const std::set<std::string> expected{
        // the dtype list: the storage type, its Dtype, the engine's storage of each dtype
        "core/engine/bfloat16.hpp", "core/engine/dtype.hpp", "core/engine/dtype.cpp", "core/engine/tensor.hpp",
        "core/engine/tensor.cpp",
        // BLAS has no bfloat16 product: widened into sgemm
        "core/ops/gemm.hpp", "core/ops/gemm.cpp",
        // float-specific fast kernels: bfloat16 rows take float arithmetic (or the reference loops)
        "core/fast/softmax.cpp", "nn/fast/kernel_primitives.hpp", "nn/fast/gelu.cpp", "nn/fast/layer_norm.cpp",
        "nn/fast/rms_norm.cpp", "nn/fast/group_norm.cpp", "nn/fast/batch_norm.cpp",
        // float accumulators: conv's col2im sums, Linear's column sums (one clone wrapper per type)
        "nn/fast/conv.cpp", "nn/functional/linear.cpp",
        // optimizers: a bfloat16 parameter steps through its float64 mirrors (float64 state)
        "optim/optimizer.cpp",
    };
    std::set<std::string> naming;
    const std::filesystem::path root(XGRAD_SOURCE_DIR);
    for (const char* folder : {"core", "nn", "optim", "distributed", "xgrad"}) {
        for (const auto& entry : std::filesystem::recursive_directory_iterator(root / folder)) {
            if (!entry.is_regular_file()) continue;
            std::ifstream in(entry.path());
            const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
            if (text.find("bfloat16") != std::string::npos || text.find("BFloat16") != std::string::npos) {
                naming.insert(std::filesystem::relative(entry.path(), root).generic_string());
            }
        }
    }
    CHECK(naming == expected);
    for (const std::string& file : naming) {
        if (!expected.count(file)) FAIL_CHECK(file << " names bfloat16 but is not in the list");
    }
}

}  // namespace xg_test_modules_bfloat16_float32
