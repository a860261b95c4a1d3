// Internal to nn/: the gate nonlinearities of the recurrent kernels (nn/functional/rnn.cpp).
#pragma once

#include <cmath>

namespace xg::nn::detail {

/// 1 / (1 + e^-v).
inline double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

/// tanh(x) to within 2 ulp, about four times faster than glibc's, which goes through expm1 and
/// took a fifth of an LSTM's forward + backward (docs/performance.md). Below |x| = 0.625 it is
/// Cephes' rational approximation x + x^3 P(x^2) / Q(x^2) (S. Moshier, tanh.c; relative error
/// 2.5e-16 there), above it 1 - 2 / (e^{2|x|} + 1) with glibc's exp, accurate because the result
/// is at least 0.55 there. tanh(+-0) = +-0, tanh(+-inf) = +-1, NaN stays NaN.
/// tests/recurrent/test_recurrent_tanh.cpp checks it against long double tanhl.
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
