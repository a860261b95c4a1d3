// Computations of tutorial 11 (A3.4, A3.5): train the character-level GPT of char_gpt.hpp with
// LayerNorm and with RMSNorm on a text that ships with the machine, and sample from both.
#pragma once

#include <cstdint>
#include <string>

#include "tutorials/common/char_gpt.hpp"

namespace tutorial_values {

struct CharGptRunConfig {
    std::string text_path = "/usr/share/common-licenses/GPL-3";
    std::size_t d_model = 48, n_layers = 2, n_heads = 4, context = 32, batch = 16;
    std::size_t steps = 400, warmup = 40;
    double lr = 3e-3;
    std::uint64_t seed = 11;
    std::string prompt = "This License";
    std::size_t sample_chars = 200;
    double temperature = 0.8;
    bool progress = true;
};

struct CharGptRun {
    std::size_t vocab = 0, text_chars = 0, parameters = 0;
    std::string architecture;       ///< the LayerNorm model's module tree (to_string)
    TrainCurve layer_norm, rms_norm;
    std::string sample_layer_norm, sample_rms_norm;
    double initial_loss_expected = 0; ///< ln(vocab)
};

CharGptRun a3_4_a3_5_char_gpt(const CharGptRunConfig& config);

}  // namespace tutorial_values
