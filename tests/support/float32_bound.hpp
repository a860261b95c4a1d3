// How far a float32 run of the mini Pre-LN model (tests/support/mini_model.hpp) may be from the
// exact logits: the tolerance of the float32 interop tests (issue 28), u = 2^-24 times a condition.
//
// Derivation (first order in u, worst case per operation, gamma_n = n u for a sum of n terms):
//  * the last op, logit_i = W_i . h + b_i with h = ln_f's output, computed from an h of relative
//    error e_h (normwise), is off by at most (d + 2) u S_i + e_h S_i, with the scale
//    S_i = ||W_i||_2 ||h||_2 + |b_i| (the Cauchy-Schwarz bound of sum_j |W_ij h_j|, the condition
//    of the dot product);
//  * e_h collects the relative errors of every op on the longest path, each passed on unamplified
//    (the condition we state: LayerNorm maps a relative error of its input to the same relative
//    error of its output when its rows have kappa^2 = 1 + mean^2/var small, and the sub-layers'
//    gains are O(1) at PyTorch's default initialisation):
//      LayerNorm    (d + 6) kappa^2 u   sums of d terms for the mean and the variance (two-pass or
//                                       Welford: error ~ kappa^2 u per term), rstd, x-hat, affine, store
//      Linear(d,2d) (d + 2) u            dot products of d terms, bias, store
//      GELU         4 u                  erf evaluated to a few ulps, store
//      Linear(2d,d) (2d + 2) u
//      residual add 1 u
//    per block (d + 6) kappa^2 + 3d + 9, and (d + 6) kappa^2 for ln_f;
//  so |logit_i - exact_i| <= K u S_i with K = L ((d + 6) kappa^2 + 3d + 9) + (d + 6) kappa^2 + d + 2,
//  kappa^2 the largest over every LayerNorm's rows (measured here on the float64 forward).
// Both a float32 run in PyTorch (float32 arithmetic) and one in xgrad (float32 stores, float64
// arithmetic between them) are within the bound of the exact logits, so within twice it of each
// other. Worst-case constants: the measured errors are far below (the tests print the ratio).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "core/engine/dtype.hpp"
#include "tests/support/mini_model.hpp"

namespace xg::test {

/// The float32 error bound of every logit of `model` on `x` (both float64: the float32 values of
/// a float32 model and input, held exactly), and what it is made of.
struct Float32LogitBound {
    Array logits64;    ///< the float64 forward: the exact logits up to float64 rounding
    Array tolerance;   ///< K u S_i per logit, shaped like the logits
    double K = 0.0;    ///< the condition factor of the derivation above
    double kappa2 = 1.0;  ///< the largest 1 + mean^2/var over every LayerNorm's rows
};

/// 1 + mean^2 / var of each row of x (last axis), the largest.
inline double max_kappa2(const Array& x) {
    const std::size_t d = x.shape().back(), rows = x.size() / d;
    double worst = 1.0;
    for (std::size_t r = 0; r < rows; ++r) {
        const double* row = x.data() + r * d;
        double mean = 0.0, var = 0.0;
        for (std::size_t j = 0; j < d; ++j) mean += row[j];
        mean /= static_cast<double>(d);
        for (std::size_t j = 0; j < d; ++j) var += (row[j] - mean) * (row[j] - mean);
        var /= static_cast<double>(d);
        worst = std::max(worst, 1.0 + mean * mean / var);
    }
    return worst;
}

/// The bound of the derivation above for `model` (float64) with `n_layers` blocks of width d.
inline Float32LogitBound mini_model_float32_bound(MiniPreLNModel& model, const Tensor& x) {
    NoGradGuard no_grad;
    const std::size_t d = x.shape().back(), n_layers = model.blocks->size();
    Float32LogitBound out;
    Tensor h = x;
    for (std::size_t i = 0; i < n_layers; ++i) {
        out.kappa2 = std::max(out.kappa2, max_kappa2(h.value()));
        h = (*model.blocks)[static_cast<std::int64_t>(i)]->forward(h);
    }
    out.kappa2 = std::max(out.kappa2, max_kappa2(h.value()));
    const Array features = model.ln_f->forward(h).value();
    out.logits64 = model.head->forward(Tensor(features)).value();

    const double dd = static_cast<double>(d), ln = (dd + 6.0) * out.kappa2;
    out.K = static_cast<double>(n_layers) * (ln + 3.0 * dd + 9.0) + ln + dd + 2.0;
    const Array& W = model.head->weight.value();
    const Array& b = model.head->bias.value();
    const std::size_t vocab = W.shape()[0], positions = features.size() / d;
    out.tolerance = Array::from_shape(out.logits64.shape());
    for (std::size_t p = 0; p < positions; ++p) {
        double h2 = 0.0;
        for (std::size_t j = 0; j < d; ++j) h2 += features.data()[p * d + j] * features.data()[p * d + j];
        for (std::size_t v = 0; v < vocab; ++v) {
            double w2 = 0.0;
            for (std::size_t j = 0; j < d; ++j) w2 += W(v, j) * W(v, j);
            const double scale = std::sqrt(w2) * std::sqrt(h2) + std::abs(b(v));
            out.tolerance.data()[p * vocab + v] = out.K * unit_roundoff(Dtype::Float32) * scale;
        }
    }
    return out;
}

/// The largest |a - b| / tolerance over all elements (<= 1 means within the bound).
inline double max_bound_ratio(const Array& a, const Array& b, const Array& tolerance) {
    double worst = 0.0;
    for (std::size_t i = 0; i < a.size(); ++i)
        worst = std::max(worst, std::abs(a.data()[i] - b.data()[i]) / tolerance.data()[i]);
    return worst;
}

}  // namespace xg::test
