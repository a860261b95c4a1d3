// Computations of tutorial 10 (A2.4, with A0.5 and A4.3): per-layer gradient norms of deep
// Pre-LN and Post-LN stacks at initialisation, read through gradient hooks, and a learning-rate x
// depth sweep of short training runs with warm-up and gradient clipping on and off.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tutorials/common/char_gpt.hpp"

namespace tutorial_values {

/// Per-block gradient norms (block 1 = nearest the input) at init, for one set-up: mean and
/// sample standard deviation over the seeds (each seed: its own initialisation and batches).
struct GradientProfile {
    std::string setup;
    std::vector<std::uint64_t> seeds;
    std::vector<double> post_ln, pre_ln;        ///< ||grad of all parameters of block l||, mean over seeds
    std::vector<double> post_ln_w2, pre_ln_w2;  ///< ||grad of the FFN's second weight|| (Xiong et al.'s W^2), mean
    std::vector<double> post_ln_sd, pre_ln_sd, post_ln_w2_sd, pre_ln_w2_sd;  ///< their standard deviations
    /// ||grad of W^2|| of every seed, [seed][block]: the verdict compares blocks seed by seed.
    std::vector<std::vector<double>> post_ln_w2_per_seed, pre_ln_w2_per_seed;
    /// The norms are read by Tensor::register_hook on every parameter of every block; this is the
    /// largest relative difference from the same norms read from .grad after the pass.
    double hook_vs_grad = 0;
};

/// The set-ups, all next-character prediction on GPL-3 windows:
/// "ce_default": cross-entropy, the library's PyTorch-style init, GPT-2 embeddings N(0, 0.02^2);
/// "ce_xavier":  cross-entropy, every Linear/attention weight Xavier-uniform and embeddings N(0, 1),
///               the assumptions of Xiong et al. (2020);
/// "degenerate": mean(LN(h)^2) of the final hidden state, a loss that is constant up to eps.
/// For each seed the norms are averaged over `batches` random batches of 8 windows of 32.
GradientProfile gradient_profile(const std::string& setup, const CharCorpus& corpus, std::size_t n_layers, std::size_t d_model,
                                 std::size_t batches = 3, const std::vector<std::uint64_t>& seeds = {2020, 2021, 2022});

/// The learning-rate x depth sweep (A0.5, A4.3): every placement, depth, learning rate, warm-up
/// on/off and clipping on/off, once per seed. AdamW (betas 0.9/0.95, weight decay 0.01).
struct SweepConfig {
    std::vector<double> lrs{1e-3, 3e-3, 1e-2, 3e-2};
    std::vector<std::size_t> depths{2, 6, 12, 24};
    std::vector<std::uint64_t> seeds{1, 2, 3};
    std::size_t d_model = 16, n_heads = 2, context = 16, batch = 8;
    std::size_t steps = 120;     ///< training steps per run
    std::size_t warmup = 40;     ///< linear warm-up length when warm-up is on
    double clip = 1.0;           ///< max gradient norm when clipping is on
    std::size_t tail = 10;       ///< final loss = mean of the last `tail` losses
    bool progress = true;
};

/// One setting of the sweep over its seeds. A run diverged when a loss or gradient became NaN/inf,
/// or when its final loss is above its loss at step 1.
struct SweepCell {
    bool pre_ln = false, warmup = false, clip = false;
    std::size_t depth = 0;
    double lr = 0;
    std::vector<double> initial_loss, final_loss;  ///< per seed (final: NaN when the loss went NaN/inf)
    /// Per seed, the training loss at every step (the loss curve); a run that went NaN/inf stops
    /// at its last finite loss, so its curve is shorter than SweepConfig::steps.
    std::vector<std::vector<double>> losses;
    std::vector<bool> diverged;                    ///< per seed
    std::size_t n_diverged() const;
    /// Mean and sample standard deviation of the final loss over the seeds that did not diverge
    /// (NaN when fewer than 1, resp. 2, remain).
    double mean_final() const;
    double sd_final() const;
};

std::vector<SweepCell> lr_depth_sweep(const CharCorpus& corpus, const SweepConfig& config);

/// Mean and sample standard deviation over the seeds of the loss at each step (index 0 = step 1),
/// over the seeds whose run reached that step (NaN where none did; std NaN where fewer than 2).
void loss_curve(const SweepCell& cell, std::size_t steps, std::vector<double>& mean, std::vector<double>& sd);

}  // namespace tutorial_values
