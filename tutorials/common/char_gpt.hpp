// A small character-level GPT (A3.4, A3.5) and its text corpus, used by tutorials 10 and 11:
// token + learned position embeddings -> N Transformer blocks (causal self-attention, FFN) ->
// final norm (Pre-LN only) -> vocabulary projection.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/random.hpp"
#include "nn/nn.hpp"
#include "tutorials/common/blocks.hpp"

namespace tutorial_values {

/// Characters of a text file as token ids (vocabulary = the sorted distinct bytes).
class CharCorpus {
public:
    explicit CharCorpus(const std::string& path);
    std::size_t vocab_size() const { return chars_.size(); }
    std::size_t size() const { return ids_.size(); }
    /// B random windows of T + 1 characters: inputs (B, T) and next-character targets (B*T,).
    void batch(std::size_t B, std::size_t T, xg::Generator& gen, xg::IndexArray& inputs, xg::IndexArray& targets) const;
    std::string decode(const std::vector<std::int64_t>& ids) const;
    std::vector<std::int64_t> encode(const std::string& text) const;

private:
    std::string chars_;
    std::vector<std::int64_t> ids_;
};

struct GptConfig {
    std::size_t vocab = 0, context = 32, d_model = 48, n_layers = 2, n_heads = 4;
    bool pre_ln = true;   ///< false: Post-LN blocks and no final norm (the original Transformer)
    bool rms = false;     ///< RMSNorm instead of LayerNorm everywhere (A3.5)
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
    std::shared_ptr<xg::nn::Embedding> tok_emb, pos_emb;
    std::shared_ptr<xg::nn::ModuleList> blocks;
    std::shared_ptr<xg::nn::Module> ln_f;  ///< null for Post-LN
    std::shared_ptr<xg::nn::Linear> head;
};

/// A training run's loss after every step.
struct TrainCurve {
    std::string name;
    std::vector<double> loss;
    double seconds = 0;
    bool diverged = false;
};

/// Mean of the last `n` entries (the curves are noisy).
double tail_mean(const std::vector<double>& v, std::size_t n = 20);

/// Trains `model` with AdamW (betas 0.9, 0.95, weight decay 0.01, grad clip 1.0) for `steps`
/// steps of batch (B, T = context), with linear warm-up over `warmup` steps (0: none).
TrainCurve train_char_model(CharGPT& model, const CharCorpus& corpus, std::size_t steps, std::size_t batch, double lr,
                            std::size_t warmup, std::uint64_t seed, const std::string& name, bool progress);

}  // namespace tutorial_values
