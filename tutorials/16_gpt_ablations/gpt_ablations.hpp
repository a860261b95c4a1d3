// Computations of tutorial 16: three ablations of the char GPT of tutorial 11, from papers beyond
// the articles. P1.1 (Xu et al. 2019): LayerNorm with its mean and/or variance detached in
// backward. P2.1, P2.2 (Zhu et al. 2025): what the trained LayerNorms compute, and DyT in their
// place. P3.1 (Wortsman et al. 2023): a learning-rate sweep with and without QK-norm, with
// gradient clipping and without it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tutorials/common/char_gpt.hpp"

namespace tutorial_values {

struct GptAblationConfig {
    std::string text_path = "/usr/share/common-licenses/GPL-3";
    double heldout_fraction = 0.1;
    std::size_t d_model = 48, n_layers = 2, n_heads = 4, context = 32, batch = 16;
    std::size_t steps = 400, warmup = 40;
    double lr = 3e-3;
    std::vector<std::uint64_t> seeds{11, 12, 13};
    /// The QK-norm sweep (gradient norms clipped at 1.0): these learning rates, each with and without
    /// QK-norm, for sweep_steps.
    std::vector<double> sweep_lrs{3e-3, 1e-2, 3e-2, 1e-1};
    /// The second QK-norm sweep, without gradient clipping: these learning rates, same steps and warm-up.
    std::vector<double> unclipped_sweep_lrs{1e-1, 3e-1, 1.0};
    std::size_t sweep_steps = 400, sweep_warmup = 40;
    std::size_t scatter_windows = 8;  ///< held-out windows whose LayerNorm inputs are plotted
    bool progress = true;
};

/// One normalisation variant of the GPT over the seeds.
struct VariantRuns {
    NormKind norm = NormKind::layer_norm;
    std::string name;
    std::vector<double> heldout;  ///< held-out loss after training, per seed (NaN: diverged)
    std::size_t diverged = 0;
};

/// A trained LayerNorm's input x against its normalised output (x - mean) / sigma (before the
/// affine gamma, beta), over the tokens of some held-out windows.
struct NormCloud {
    std::string layer;                  ///< "blocks.0.norm1", ..., "ln_f"
    std::vector<double> input, output;  ///< one entry per (token, feature)
    double r2_linear = 0;               ///< R^2 of the best line output = a x + c
    double r2_tanh = 0;                 ///< R^2 of the best a tanh(b x) + c
    double tanh_b = 0;                  ///< its b
};

struct NormAblation {
    std::size_t vocab = 0, heldout_chars = 0;
    /// LayerNorm, mean detached, variance detached, both detached, no norm, DyT: in that order.
    std::vector<VariantRuns> variants;
    std::vector<NormCloud> clouds;  ///< of the first seed's trained LayerNorm model, every norm layer
    std::vector<double> dyt_alpha;  ///< the first seed's trained DyT alphas, every norm layer
};

NormAblation norm_ablation(const GptAblationConfig& config);

/// One learning rate, with or without QK-norm, over the seeds.
struct QkCell {
    double lr = 0;
    bool qk_norm = false;
    std::vector<double> heldout;         ///< per seed (NaN: a non-finite loss stopped the run)
    std::vector<double> max_logit;       ///< per seed: the largest attention logit over training
    std::vector<double> first_seed_logit;  ///< the first seed's largest logit at every step
    std::vector<bool> run_diverged;      ///< per seed: non-finite, or held-out loss above ln(vocab) at the end
    std::size_t diverged = 0;            ///< how many seeds diverged
};

/// Every learning rate of `lrs`, without and with QK-norm, over the seeds: sweep_steps steps each
/// after sweep_warmup warm-up steps, gradient norms clipped at `clip` (0: not clipped).
std::vector<QkCell> qk_norm_sweep(const GptAblationConfig& config, const std::vector<double>& lrs, double clip);
/// The clipped sweep: config.sweep_lrs, clip 1.0.
std::vector<QkCell> qk_norm_sweep(const GptAblationConfig& config);

/// R^2 of the least-squares fits of y against x by a line and by a tanh(b x) + c (b searched on a
/// grid): {r2_linear, r2_tanh, b}.
void fit_line_and_tanh(const std::vector<double>& x, const std::vector<double>& y, double& r2_linear, double& r2_tanh,
                       double& b);

}  // namespace tutorial_values
