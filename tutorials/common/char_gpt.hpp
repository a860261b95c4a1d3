// A small character-level GPT (A3.4, A3.5) and its text corpus, used by tutorials 10 and 11:
// token + learned position embeddings -> N Transformer blocks (causal self-attention, FFN) ->
// final norm (Pre-LN only) -> vocabulary projection.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/engine/random.hpp"
#include "nn/nn.hpp"
#include "tutorials/common/blocks.hpp"

namespace tutorial_values {

/// Characters of a text file as token ids (vocabulary = the sorted distinct bytes).
class CharCorpus {
public:
    /// With `heldout_fraction` > 0 the last part of the text is kept out of batch() for
    /// heldout_batch() (the vocabulary covers the whole text).
    explicit CharCorpus(const std::string& path, double heldout_fraction = 0.0);
    std::size_t vocab_size() const { return chars_.size(); }
    /// Characters batch() draws from (the whole text without a held-out part).
    std::size_t size() const { return ids_.size(); }
    std::size_t heldout_size() const { return heldout_.size(); }
    /// B random windows of T + 1 characters: inputs (B, T) and next-character targets (B*T,).
    void batch(std::size_t B, std::size_t T, xg::Generator& gen, xg::IndexArray& inputs, xg::IndexArray& targets) const;
    /// Every non-overlapping window of T + 1 characters of the held-out part, in order.
    void heldout_batch(std::size_t T, xg::IndexArray& inputs, xg::IndexArray& targets) const;
    std::string decode(const std::vector<std::int64_t>& ids) const;
    std::vector<std::int64_t> encode(const std::string& text) const;

private:
    std::string chars_;
    std::vector<std::int64_t> ids_, heldout_;
};

struct GptConfig {
    std::size_t vocab = 0, context = 32, d_model = 48, n_layers = 2, n_heads = 4;
    bool pre_ln = true;   ///< false: Post-LN blocks and no final norm (the original Transformer)
    NormKind norm = NormKind::layer_norm;  ///< every norm layer, ln_f included (A3.5: RMSNorm)
    bool use_ln_f = true;  ///< Pre-LN only: false leaves out the final norm (A2.5)
    bool qk_norm = false;  ///< QK-norm in every attention (Wortsman et al. 2023)
    /// Tutorial 17: where the blocks normalise; applies when pre_ln is true (pre_ln = false is
    /// Post-LN whatever this says). Post-LN and DeepNorm have no final norm.
    NormPlacement placement = NormPlacement::pre;
};

class CharGPT : public xg::nn::Module {
public:
    explicit CharGPT(const GptConfig& config);
    /// The residual stream after the last block and the final norm: (B, T, d).
    Tensor hidden(const xg::IndexArray& tokens);
    /// Logits (B, T, vocab).
    Tensor logits(const xg::IndexArray& tokens);
    /// Mean next-character cross-entropy over (B, T) inputs and (B*T,) targets.
    Tensor loss(const xg::IndexArray& tokens, const xg::IndexArray& targets);
    /// Samples `n` characters after `prompt` (temperature sampling from `gen`).
    std::vector<std::int64_t> generate(std::vector<std::int64_t> prompt, std::size_t n, double temperature, xg::Generator& gen);

    GptConfig config;
    /// Tutorial 17: a block that forward leaves out (its input passes on unchanged); none when
    /// unset.
    std::optional<std::size_t> skipped_block;
    /// Tutorial 17: called with each block's index and its output, the residual stream.
    std::function<void(std::size_t, const Tensor&)> after_block;
    std::shared_ptr<xg::nn::Embedding> tok_emb, pos_emb;
    std::shared_ptr<xg::nn::ModuleList> blocks;
    std::shared_ptr<xg::nn::Module> ln_f;  ///< null for Post-LN and without use_ln_f
    std::shared_ptr<xg::nn::Linear> head;
};

/// A training run's loss after every step.
struct TrainCurve {
    std::string name;
    std::vector<double> loss;
    double seconds = 0;
    double median_step_seconds = 0;  ///< robust to the pauses of a shared machine
    bool diverged = false;
};

/// Mean of the last `n` entries (the curves are noisy).
double tail_mean(const std::vector<double>& v, std::size_t n = 20);

/// Mean next-character cross-entropy over the corpus' held-out windows (no graph is recorded).
double heldout_loss(CharGPT& model, const CharCorpus& corpus);

/// Largest attention logit of the last forward over the model's blocks (see
/// nn::MultiheadAttention::last_max_logit).
double max_attention_logit(const CharGPT& model);

/// A training run's settings (see train_char_model).
struct TrainOptions {
    std::size_t steps = 400, batch = 16, warmup = 40;
    double lr = 3e-3;
    double clip = 1.0;  ///< gradient-norm clip; 0: none
    std::uint64_t seed = 11;
    std::string name;
    bool progress = false;
    /// Called after every step's forward with the step (0-based) and its loss.
    std::function<void(std::size_t, double)> after_forward;
};

/// Trains `model` with AdamW (betas 0.9, 0.95, weight decay 0.01) under `options`; stops and
/// marks the curve diverged at a non-finite loss or gradient.
TrainCurve train_char_model(CharGPT& model, const CharCorpus& corpus, const TrainOptions& options);

/// Trains `model` with AdamW (betas 0.9, 0.95, weight decay 0.01, grad clip 1.0) for `steps`
/// steps of batch (B, T = context), with linear warm-up over `warmup` steps (0: none).
TrainCurve train_char_model(CharGPT& model, const CharCorpus& corpus, std::size_t steps, std::size_t batch, double lr,
                            std::size_t warmup, std::uint64_t seed, const std::string& name, bool progress);

}  // namespace tutorial_values
