// Computations of tutorial 08 (A4.5, A4.6): padding and batch size one, BatchNorm vs LayerNorm.
#pragma once

#include <string>

#include "core/engine/tensor.hpp"

namespace tutorial_values {

using xg::Array;

/// A4.5: sequences of lengths 3 and 5 (hidden 4) padded with zeros to length 5, then to 8.
struct Padding {
    Array bn_mean_pad5, bn_mean_pad8;   ///< BatchNorm's per-feature batch means (padding included)
    double bn_real_token_change = 0;    ///< max change of the real tokens' BN outputs, pad 5 -> 8
    double ln_real_token_change = 0;    ///< same for LayerNorm: 0
    Array bn_first_token_pad5, bn_first_token_pad8, ln_first_token;  ///< sequence 0, token 0
};
Padding a4_5_padding();

/// A4.6: a batch of one sample (4 features).
struct BatchOfOne {
    std::string bn_train_error;         ///< BatchNorm1d in training mode refuses it
    Array input;                        ///< the sample: the first row of the last training batch
    Array running_mean, running_var;    ///< after 20 training batches of 16: what eval mode uses
    Array bn_eval_out;                  ///< eval mode: (input - running_mean) / sqrt(running_var + eps)
    Array ln_train_out;
    double ln_train_vs_eval = 0;        ///< 0
    double ln_alone_vs_in_batch = 0;    ///< the same sample inside a batch of 16: 0
    double bn_alone_eval_vs_in_batch_train = 0;  ///< BN: eval-alone vs train-in-batch differ
};
BatchOfOne a4_6_batch_of_one();

}  // namespace tutorial_values
