// Computations of tutorial 11 (A3.4, A3.5, A2.5): train the character-level GPT of char_gpt.hpp
// with LayerNorm, with RMSNorm and without ln_f, over several seeds, on a text that ships with the
// machine (its last tenth held out), and sample from the first seed's models.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tutorials/common/char_gpt.hpp"

namespace tutorial_values {

struct CharGptRunConfig {
    std::string text_path = "/usr/share/common-licenses/GPL-3";
    double heldout_fraction = 0.1;  ///< the end of the text, never trained on
    std::size_t d_model = 32, n_layers = 2, n_heads = 4, context = 32, batch = 16;
    std::size_t steps = 150, warmup = 15;
    double lr = 3e-3;
    std::vector<std::uint64_t> seeds{11, 12, 13};  ///< the first one's curves and samples are shown
    std::string prompt = "This License";
    std::size_t sample_chars = 200;
    double temperature = 0.8;
    bool progress = true;
};

/// One model variant over the seeds.
struct SeedRuns {
    std::string name;
    std::vector<double> heldout;      ///< held-out loss after training, per seed
    std::vector<double> train_tail;   ///< mean training loss of the last 20 steps, per seed
    std::vector<double> ms_per_step;  ///< median wall time of a training step, per seed
    std::size_t diverged = 0;
};

struct CharGptRun {
    std::size_t vocab = 0, text_chars = 0, heldout_chars = 0, parameters = 0;
    std::string architecture;         ///< the LayerNorm model's module tree (to_string)
    TrainCurve layer_norm, rms_norm;  ///< the first seed's training curves
    std::string sample_layer_norm, sample_rms_norm;
    double initial_loss_expected = 0;  ///< ln(vocab)
    SeedRuns ln, rms, no_ln_f;         ///< LayerNorm, RMSNorm, LayerNorm without ln_f
};

/// What is known before any training: the text's sizes, ln(vocab), the LayerNorm model's module
/// tree and parameter count (the rest of CharGptRun empty). The program prints it first, so that
/// --step shows Step 1 before the nine trainings run.
CharGptRun a3_4_char_gpt_setup(const CharGptRunConfig& config);
/// The setup, then every variant trained over the seeds.
CharGptRun a3_4_a3_5_char_gpt(const CharGptRunConfig& config);

}  // namespace tutorial_values
