// Computations of tutorial 13: LSTM vs layer-normalised LSTM (A1.5), with recurrent BatchNorm
// (BN-LSTM, gain 0.1 and 1), on a character-level model of the GPL-3 text that ships with Debian,
// its last 10% held out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tutorial_values {

/// The quick run's settings (the tutorial's --full changes hidden, context, steps, eval_every, target).
struct LnLstmConfig {
    std::size_t embed = 32, hidden = 64, context = 32, batch = 16;
    std::size_t steps = 150, eval_every = 25;
    double lr = 3e-3;     ///< Adam, every model; gradients clipped to norm 1
    double target = 2.9;  ///< held-out loss (nats per character) whose first crossing is reported
    std::vector<std::uint64_t> seeds{1, 2, 3};
};

/// The text the tutorial reads (in Debian's base-files: always there).
inline const char* const kLnLstmTextPath = "/usr/share/common-licenses/GPL-3";

/// A text split into a training part (the first 90%) and a held-out part (the last 10%).
struct LnLstmText {
    std::string chars;                      ///< the vocabulary: sorted distinct bytes
    std::vector<std::int64_t> train, held;  ///< as ids into chars
};
LnLstmText a1_5_load_text(const std::string& path);

/// The four models compared: the cell, and for BN-LSTM the initial gain of its BatchNorms.
struct LnLstmVariant {
    enum Cell { lstm, layer_norm, batch_norm } cell;
    double gain;       ///< BN-LSTM only
    const char* name;  ///< as the tables print it
};
/// LSTM, LN-LSTM, BN-LSTM g0.1, BN-LSTM g1: in that order.
const std::vector<LnLstmVariant>& a1_5_variants();

struct LnLstmCurve {
    std::vector<double> held;  ///< held-out loss at step 0, eval_every, 2 eval_every, ...
    double train_tail = 0;     ///< mean training loss over the last eval_every steps
    double seconds = 0;
};
/// Embedding -> the variant's cell unrolled over `context` characters -> Linear, trained with Adam
/// (clip 1.0) on random windows (Generator(seed + 1000): the same windows for every model of a seed).
LnLstmCurve a1_5_train(const LnLstmText& text, const LnLstmConfig& config, const LnLstmVariant& variant,
                       std::uint64_t seed);

/// Steps to the target: the first evaluation at or under it, or -1 when never reached.
double a1_5_steps_to_target(const LnLstmCurve& curve, const LnLstmConfig& config);
/// The crossing of the target, interpolated linearly between the two evaluations around it; a run
/// that never crosses counts as config.steps.
double a1_5_interpolated_crossing(const LnLstmCurve& curve, const LnLstmConfig& config);

}  // namespace tutorial_values
