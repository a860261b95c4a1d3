// Computations of tutorial 06 (A1.2): the paper's Table 1 (invariance of BatchNorm, WeightNorm and
// LayerNorm applied to the summed inputs a = W x) measured numerically.
#pragma once

#include <string>
#include <vector>

#include "core/engine/tensor.hpp"

namespace tutorial_values {

using xg::Tensor;

/// Weight normalisation (Salimans & Kingma 2016): each row of the weight is w_i = g_i v_i / ||v_i||,
/// so h = x (g v / ||v||)^T. A small reparameterisation written here from core ops.
Tensor weight_norm_linear(const Tensor& x, const Tensor& v, const Tensor& g);

/// One transformation of the paper's table, with the measured max output change per method.
struct InvarianceRow {
    std::string transformation;
    double bn_change = 0, wn_change = 0, ln_change = 0;  ///< max |output' - output|
    bool paper_bn = false, paper_wn = false, paper_ln = false;  ///< invariant according to Table 1
    bool in_paper = true;  ///< false for the article's extra claim (single-case re-centering)
};

/// Threshold under which a change counts as invariant (eps = 0 is used, so ~1e-15 is rounding).
constexpr double kInvariantTol = 1e-9;

/// The six transformations of Table 1 plus "single training case re-centering" (the article's
/// prose claims LN is invariant to it; it is not). x (8, 5), W (6, 5), eps 0.
std::vector<InvarianceRow> a1_2_invariance_table();

}  // namespace tutorial_values
