// Internal to nn/: the gate nonlinearities of the recurrent kernels (nn/functional_rnn.cpp).
#pragma once

#include <cmath>

namespace xg::nn::detail {

/// 1 / (1 + e^-v).
inline double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

/// tanh(x) within 2 ulp of glibc's, at a quarter of its cost: glibc's tanh goes through expm1
/// (15 ns a call here, a fifth of the LSTM benchmark's time), this one 3.5-4 ns. Below
/// |x| = 0.625 it is Cephes' rational approximation x + x^3 P(x^2) / Q(x^2) (S. Moshier, tanh.c;
/// relative error 2.5e-16 there), above it 1 - 2 / (e^{2|x|} + 1) with glibc's exp, which is
/// exact to ~1 ulp there because the result is at least 0.55. tanh(+-0) = +-0, tanh(+-inf) = +-1,
/// NaN stays NaN. tests/unit/test_fused_invariants.cpp compares it with std::tanh.
inline double tanh(double x) {
    const double z = std::fabs(x);
    if (z < 0.625) {
        if (x == 0.0) return x;  // keeps the sign of -0
        const double s = x * x;
        const double p = (-9.64399179425052238628e-1 * s - 9.92877231001918586564e1) * s - 1.61468768441708447952e3;
        const double q = ((s + 1.12811678491632931402e2) * s + 2.23548839060100448583e3) * s + 4.84406305325125486048e3;
        return x + x * s * (p / q);
    }
    const double t = 1.0 - 2.0 / (std::exp(2.0 * z) + 1.0);
    return x < 0.0 ? -t : t;
}

}  // namespace xg::nn::detail
