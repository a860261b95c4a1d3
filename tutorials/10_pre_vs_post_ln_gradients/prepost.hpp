// Computations of tutorial 10 (A2.4, with A0.5 and A4.3): per-layer gradient norms of deep
// Pre-LN and Post-LN stacks at initialisation, and short training runs with and without warm-up.
#pragma once

#include <string>
#include <vector>

#include "tutorials/common/char_gpt.hpp"

namespace tutorial_values {

/// Per-block gradient norms (block 1 = nearest the input) at init, for one set-up.
struct GradientProfile {
    std::string setup;
    std::vector<double> post_ln, pre_ln;        ///< ||grad of all parameters of block l||
    std::vector<double> post_ln_w2, pre_ln_w2;  ///< ||grad of the FFN's second weight|| (Xiong et al.'s W^2)
};

/// The set-ups, all next-character prediction on GPL-3 windows:
/// "ce_default": cross-entropy, the library's PyTorch-style init, GPT-2 embeddings N(0, 0.02^2);
/// "ce_xavier":  cross-entropy, every Linear/attention weight Xavier-uniform and embeddings N(0, 1),
///               the assumptions of Xiong et al. (2020);
/// "degenerate": mean(LN(h)^2) of the final hidden state, a loss that is constant up to eps.
/// Each profile is averaged over `batches` random batches.
GradientProfile gradient_profile(const std::string& setup, const CharCorpus& corpus, std::size_t n_layers, std::size_t d_model,
                                 std::size_t batches = 3);

/// Training curves of Post-LN and Pre-LN stacks, each without and with linear warm-up.
struct WarmupConfig {
    std::size_t n_layers = 12, d_model = 32, n_heads = 4, context = 32, batch = 8;
    std::size_t steps = 120, warmup = 40;
    double lr = 3e-3;
    std::uint64_t seed = 10;
    bool progress = true;
};
std::vector<TrainCurve> warmup_runs(const CharCorpus& corpus, const WarmupConfig& config);

}  // namespace tutorial_values
