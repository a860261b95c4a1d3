// Computations of tutorial 02 (A0.2, A1.1, A3.3, A4.1, A4.2): which axis BatchNorm and LayerNorm
// take their statistics over, and what follows from it. All measured with the library's modules.
#pragma once

#include <string>
#include <vector>

#include "core/engine/tensor.hpp"

namespace tutorial_values {

using xg::Array;
using xg::Shape;

/// Per-feature (BatchNorm) and per-sample (LayerNorm) statistics of one (B, H) matrix.
struct AxisStats {
    Array x;
    Array bn_mean, bn_var;  ///< (H,): down the batch, biased
    Array ln_mean, ln_var;  ///< (B,): across the features, biased
    Array bn_out, ln_out;   ///< BatchNorm1d(H) in training mode, LayerNorm(H)
};
/// Statistics of `x` (B, H) computed by BatchNorm1d / LayerNorm and by core mean/var.
AxisStats axis_stats(const Array& x);

/// A0.2: the blog's comparison on a (3, 4) matrix, plus measured evidence for its table rows.
struct AxesComparison {
    AxisStats stats;
    double bn_change_from_other_sample = 0; ///< max change of sample 0's BN output when sample 2 changes
    double ln_change_from_other_sample = 0; ///< same for LN (0: LN does not look at other samples)
    double bn_train_vs_eval = 0;            ///< max |train output - eval output| after one training step
    double ln_train_vs_eval = 0;
};
AxesComparison a0_2_axes();

/// A1.1: samples [90, 80, 70] and [60, 50, 40].
AxisStats a1_1_scores();

/// A3.3: statistics along axis 0 (the batch) instead of the last axis.
struct AxisPitfall {
    Array x;
    Array axis0_by_hand;          ///< (x - mean(x, 0)) / sqrt(var(x, 0) + eps)
    Array axis_last_by_hand;      ///< (x - mean(x, -1)) / sqrt(var(x, -1) + eps)
    double axis0_vs_batchnorm = 0;  ///< max |axis0_by_hand - BatchNorm1d|: ~0, it IS BatchNorm
    double axis0_vs_layernorm = 0;  ///< large: it is not LayerNorm
    double last_vs_layernorm = 0;   ///< ~0
};
AxisPitfall a3_3_axis_pitfall();

/// A4.1: LayerNorm on (batch, seq, hidden) normalises each token's hidden vector only.
struct LayoutCheck {
    std::vector<Shape> shapes;            ///< inputs tried: different batch sizes and lengths
    std::vector<double> max_token_mean;   ///< max |mean| over tokens of the output
    std::vector<double> max_token_var_err; ///< max |var - 1| over tokens (biased var; ~eps effect)
    double same_token_other_batch = 0;    ///< one token normalised alone vs inside a (2, 3, H) batch
};
LayoutCheck a4_1_layout();

/// A4.2: the comparison table, each row backed by a measured number where one exists.
struct ComparisonTable {
    std::vector<std::vector<std::string>> rows;  ///< header + rows (text for the tutorial)
    std::vector<std::string> notes;              ///< what the (a), (b), (c) marks in the rows mean
    std::size_t ln_saved_stats = 0;  ///< numbers LayerNorm's node keeps for a (4, 16, 32) input
    std::size_t bn_saved_stats = 0;  ///< numbers BatchNorm's node keeps for the same data as (64, 32)
};
ComparisonTable a4_2_table();

}  // namespace tutorial_values
