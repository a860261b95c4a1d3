// The Transformer blocks of the articles as xg::nn modules (A0.4, A0.5, A2.3, A2.6, A4.4, A4.7,
// A4.8), written the way a user of the library would, with the articles' attribute names so
// PyTorch state_dicts load directly. Used by tutorials 07, 10 and 11.
#pragma once

#include <memory>
#include <string>

#include "nn/nn.hpp"

namespace tutorial_values {

using xg::Tensor;
namespace nn = xg::nn;

/// Article 002's Sublayer: Linear(d, 2d) -> GELU -> Linear(2d, d) (attribute `fc`).
class Sublayer : public nn::Module {
public:
    explicit Sublayer(std::size_t d);
    Tensor forward(const Tensor& x) override { return fc->forward(x); }
    std::shared_ptr<nn::Sequential> fc;
};

/// Article 002's PostLNBlock: y = LN(x + F(x)).
class PostLNBlock : public nn::Module {
public:
    explicit PostLNBlock(std::size_t d);
    Tensor forward(const Tensor& x) override;
    std::shared_ptr<Sublayer> sub;
    std::shared_ptr<nn::LayerNorm> ln;
};

/// Article 002's PreLNBlock: y = x + F(LN(x)).
class PreLNBlock : public nn::Module {
public:
    explicit PreLNBlock(std::size_t d);
    Tensor forward(const Tensor& x) override;
    std::shared_ptr<Sublayer> sub;
    std::shared_ptr<nn::LayerNorm> ln;
};

/// Article 002's MiniPreLNModel: blocks -> ln_f -> head (x is already embedded: (B, T, d)).
class MiniPreLNModel : public nn::Module {
public:
    MiniPreLNModel(std::size_t d, std::size_t n_layers, std::size_t vocab_size, bool use_ln_f = true);
    Tensor forward(const Tensor& x) override;
    std::shared_ptr<nn::ModuleList> blocks;
    std::shared_ptr<nn::LayerNorm> ln_f;
    std::shared_ptr<nn::Linear> head;
    bool use_ln_f;
};

/// Article 000's FFN: Linear(d, 4d) -> GELU -> Linear(4d, d).
std::shared_ptr<nn::Sequential> make_ffn(std::size_t d, std::size_t hidden);

/// The normalisation layer of a block (and of ln_f): LayerNorm, its replacements (A3.5 RMSNorm,
/// DyT of Zhu et al. 2025), LayerNorm with its mean and/or variance detached in backward (the
/// ablation of Xu et al. 2019), or none at all.
enum class NormKind { layer_norm, rms_norm, dyt, detach_mean, detach_var, detach_both, none };

/// A fresh normalisation layer of width d of the given kind.
std::shared_ptr<nn::Module> make_norm(NormKind kind, std::size_t d);

/// LayerNorm composed from core ops, with the mean and/or the variance optionally detached: the
/// forward value is LayerNorm's, but no gradient flows back through a detached statistic, as in
/// Xu et al. 2019's DetachNorm (both detached). Parameters `weight` (ones) and `bias` (zeros).
class DetachedLayerNorm : public nn::Module {
public:
    DetachedLayerNorm(std::size_t d, bool detach_mean, bool detach_var, double eps = 1e-5);
    Tensor forward(const Tensor& x) override;
    std::string extra_repr() const override;
    nn::Parameter weight, bias;
    bool detach_mean, detach_var;
    double eps;
};

/// No normalisation: forward returns its input (the "without normalisation" baseline).
class NoNorm : public nn::Module {
public:
    Tensor forward(const Tensor& x) override { return x; }
};

/// Brody et al. 2023 split LayerNorm (without affine) in two; tutorial 17 ablates each part.
/// LayerNorm's first part: x - mean(x), the projection orthogonal to the all-ones vector.
class MeanProjection : public nn::Module {
public:
    Tensor forward(const Tensor& x) override;
};

/// LayerNorm's second part: sqrt(d) x / sqrt(||x||^2 + d eps), onto the sphere of radius sqrt(d).
class SphereScaling : public nn::Module {
public:
    explicit SphereScaling(double eps_ = 1e-5) : eps(eps_) {}
    Tensor forward(const Tensor& x) override;
    double eps;
};

/// Where a Transformer block puts its norms (tutorial 17), F = attention or FFN, N = a norm layer:
/// post      x <- N(x + F(x))                          (Vaswani et al. 2017)
/// pre       x <- x + F(N(x))                          (Xiong et al. 2020)
/// peri      x <- x + N_out(F(N(x)))                   (Kim et al. 2025, Peri-LN)
/// deepnorm  x <- N(alpha x + F(x)), alpha = (2L)^(1/4), the FFN's, value and output
///           projections initialised times beta = (8L)^(-1/4)  (Wang et al. 2022, L blocks)
/// pre_lns   x <- x + F(N(x) / sqrt(l)), l = 1..L the block's index  (Sun et al. 2025, LNS)
enum class NormPlacement { post, pre, peri, deepnorm, pre_lns };

/// "Post-LN", "Pre-LN", "Peri-LN", "DeepNorm", "Pre-LN+LNS".
std::string placement_name(NormPlacement placement);

/// Article 000's Transformer blocks with multi-head self-attention (batch first).
/// Post-LN: x = norm1(x + attn(x, x, x)); x = norm2(x + ffn(x)).
/// Pre-LN:  x = x + attn(norm1(x)); x = x + ffn(norm2(x)).
/// `causal` masks future positions (GPT); `rms` swaps LayerNorm for RMSNorm (A3.5).
class TransformerBlock : public nn::Module {
public:
    TransformerBlock(std::size_t d_model, std::size_t nhead, bool pre_ln, bool causal = false, bool rms = false);
    /// With norm layers of kind `norm` and, with `qk_norm`, QK-norm in the attention (Wortsman
    /// et al. 2023).
    TransformerBlock(std::size_t d_model, std::size_t nhead, bool pre_ln, bool causal, NormKind norm, bool qk_norm);
    /// Block `layer` (1-based) of `n_layers` with its norms placed as `placement` (see
    /// NormPlacement; Peri-LN adds the output norms norm1_out and norm2_out).
    TransformerBlock(std::size_t d_model, std::size_t nhead, NormPlacement placement, std::size_t layer,
                     std::size_t n_layers, bool causal = true, NormKind norm = NormKind::layer_norm);
    Tensor forward(const Tensor& x) override;
    /// A4.7: zero the last Linear of both residual branches, so a Pre-LN block starts as identity.
    void zero_init_residual();
    std::shared_ptr<nn::MultiheadAttention> attn;
    std::shared_ptr<nn::Sequential> ffn;
    std::shared_ptr<nn::Module> norm1, norm2;
    std::shared_ptr<nn::Module> norm1_out, norm2_out;  ///< Peri-LN only, else null
    bool pre_ln, causal;
    NormPlacement placement = NormPlacement::pre;
    double residual_weight = 1.0;  ///< DeepNorm's alpha, 1 otherwise
    double norm_scale = 1.0;       ///< LNS's 1 / sqrt(layer), 1 otherwise
};

/// A4.4: a LayerNorm whose gamma/beta are created from the first input's last axis, like the
/// Keras layer's build(input_shape).
class LazyLayerNorm : public nn::Module {
public:
    explicit LazyLayerNorm(double eps = 1e-5) : eps(eps) {}
    Tensor forward(const Tensor& x) override;
    bool built() const { return gamma.defined(); }
    double eps;
    nn::Parameter gamma, beta;
};

/// A4.8: ScaleNorm (Nguyen & Salazar 2019): g * x / ||x|| over the last axis, one scalar g.
class ScaleNorm : public nn::Module {
public:
    explicit ScaleNorm(double g0, double eps = 1e-5);
    Tensor forward(const Tensor& x) override;
    nn::Parameter g;
    double eps;
};

/// A4.8: DeepNorm residual (Wang et al. 2022): y = LN(alpha * x + F(x)), alpha > 1.
class DeepNormBlock : public nn::Module {
public:
    DeepNormBlock(std::size_t d, double alpha);
    Tensor forward(const Tensor& x) override;
    std::shared_ptr<Sublayer> sub;
    std::shared_ptr<nn::LayerNorm> ln;
    double alpha;
};

}  // namespace tutorial_values
