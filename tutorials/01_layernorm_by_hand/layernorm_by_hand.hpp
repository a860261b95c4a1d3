// Computations of tutorial 01 (A0.1, A2.1, A2.2, A3.1, A3.2): LayerNorm on tiny vectors, step by
// step. 01_layernorm_by_hand.cpp beside this header computes and prints them;
// tests/tutorials/test_tutorials.cpp asserts them.
#pragma once

#include <string>

#include "core/engine/tensor.hpp"

namespace tutorial_values {

using xg::Array;
using xg::Shape;

/// A0.1: the four steps of the formula, written with core ops on x = [[2, 4, 6, 8]], eps 1e-5,
/// gamma = ones(H), beta = zeros(H).
struct FormulaSteps {
    Array x, mean, variance, x_hat, y;
    Shape gamma_shape, beta_shape;
    Array gamma, beta;
    double eps = 1e-5;
};
FormulaSteps a0_1_formula();

/// A2.1: the article's hand calculation on x = (2, 4, 6, 8), eps ignored as in the article.
struct HandCalculation {
    Array x;
    double mean = 0, variance = 0, sigma = 0;
    Array centered, normalized;
    double sum_of_outputs = 0;
};
HandCalculation a2_1_hand_calculation();

/// A2.2: the library's LayerNorm(4) on [[2, 4, 6, 8]] (eps 1e-5, fresh gamma/beta).
struct Builtin {
    Array out;
    Shape weight_shape, bias_shape;
    Array weight, bias;
    double max_diff_vs_formula = 0;  ///< against A0.1's core-op version
    double max_diff_vs_hand = 0;     ///< against A2.1 (no eps): the eps effect, ~1.4e-6
};
Builtin a2_2_builtin();

/// A3.1: single-vector LayerNorm over x = [1, 2, 3, 4], eps 1e-5, statistics over the whole vector.
struct SingleVector {
    Array x;
    double mean = 0, variance = 0, sigma = 0;
    Array plain;            ///< gamma = 1, beta = 0 (exact)
    Array affine;           ///< gamma = 2, beta = 1 (exact)
    Array affine_round4;    ///< rounded to 4 decimals
    Array affine_trunc4;    ///< truncated to 4 decimals
    Array article_affine{-1.6832, 0.1056, 1.8944, 3.6832}; ///< as printed in the article
    double article_sigma = 1.11803;                         ///< as printed in the article
};
SingleVector a3_1_single_vector();

/// A3.2: a constant vector with and without eps.
struct EpsPitfall {
    Array x;                    ///< [3, 3, 3, 3]
    Array out_without_eps;      ///< 0/0 = NaN
    Array grad_without_eps;     ///< NaN too
    std::string anomaly_message; ///< what anomaly mode says about the eps-free version
    Array out_with_eps;         ///< = beta
    Array grad_with_eps;        ///< finite: gamma/sqrt(eps) * (w - mean(w))
    Array beta, upstream;       ///< beta used, upstream gradient w of sum(y * w)
    Array near_constant;        ///< [0.1, 0.1, 0.1]: constant only up to rounding
    Array near_constant_without_eps; ///< rounding noise blown up (or NaN), never the right 0
    Array near_constant_with_eps;
};
EpsPitfall a3_2_eps_pitfall();

/// Rounds / truncates every element to `decimals` places (helpers for A3.1).
Array round_to(const Array& a, int decimals);
Array truncate_to(const Array& a, int decimals);

}  // namespace tutorial_values
