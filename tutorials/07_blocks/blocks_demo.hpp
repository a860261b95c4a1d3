// Computations of tutorial 07 (A0.4, A0.5, A2.3, A2.5, A2.6, A4.3, A4.4, A4.7, A4.8): the blocks of
// tutorials/common/blocks.hpp run on small inputs.
#pragma once

#include <string>
#include <vector>

#include "core/tools/gradcheck.hpp"
#include "core/engine/tensor.hpp"

namespace tutorial_values {

using xg::Array;
using xg::Shape;

/// A0.4 / A0.5: Post-LN and Pre-LN Transformer blocks (d 16, 4 heads) on x (2, 5, 16).
struct TransformerBlocks {
    Shape in_shape, post_shape, pre_shape;
    std::size_t params = 0;              ///< parameter tensors per block
    double post_max_token_mean = 0;      ///< Post-LN output tokens are normalised ...
    double post_max_token_var_err = 0;
    double pre_token_std_min = 0, pre_token_std_max = 0;  ///< ... Pre-LN ones are not
    xg::GradcheckResult post_gradcheck, pre_gradcheck;  ///< gradchecks of a tiny block of each kind
    bool gradchecks_ok = false;
};
TransformerBlocks a0_4_a0_5_blocks();

/// A2.3 / A2.5: the residual stream through 8 stacked blocks of each placement (d 32).
struct ResidualStream {
    std::vector<double> post_std, pre_std;  ///< std of the block outputs after each depth (0 = input)
    double logits_std_with_ln_f = 0, logits_std_without_ln_f = 0;  ///< 8 Pre-LN blocks + head
    double pre_final_token_std_max = 0;     ///< largest per-token std of the last Pre-LN output
};
ResidualStream a2_3_a2_5_residual_stream();

/// A2.6: MiniPreLNModel(32, 4, 1000) on randn(2, 6, 32) with random targets.
struct MiniModelRun {
    Shape logits_shape;
    double loss = 0, ln_vocab = 0;
    std::size_t parameter_tensors = 0, scalars = 0;
    double grad_norm = 0;
    bool all_grads_finite = false;
    // The same model loaded with PyTorch's weights (tests/fixtures/mini_model).
    bool fixture_found = false;
    double torch_loss = 0, our_loss_torch_weights = 0;
    double max_logits_diff = 0, max_grad_rel_diff = 0;
};
MiniModelRun a2_6_mini_model(const std::string& fixture_dir);

/// A4.4: the lazily built LayerNorm.
struct LazyBuild {
    bool built_before = true;
    Shape gamma_shape, beta_shape;
    double max_diff_vs_layernorm = 0;
    std::string mismatch_error;
};
LazyBuild a4_4_lazy();

/// A4.7: a Pre-LN block at init: how far block(x) is from x.
struct IdentityInit {
    double default_change = 0;      ///< PyTorch-style init
    double small_gamma_change = 0;  ///< both LayerNorm gammas = 0.01
    double zero_residual_change = 0; ///< last Linear of both branches zeroed: exactly 0
    double zeroed_weight_grad_norm = 0; ///< ... yet that weight gets a gradient, so it learns
};
IdentityInit a4_7_identity_init();

/// A4.8: RMSNorm, ScaleNorm and DeepNorm next to LayerNorm.
struct Relatives {
    Array x, layer_norm, rms_norm, rms_by_formula, scale_norm;
    double rms_vs_formula = 0;
    double scale_vs_rms = 0;      ///< ScaleNorm(g = sqrt(d)) vs RMSNorm (eps 0 for both)
    double ln_vs_rms_zero_mean = 0; ///< equal when the mean is already 0
    std::size_t deepnorm_layers = 12;
    double deepnorm_alpha = 0, deepnorm_beta = 0;   ///< (2N)^(1/4), (8N)^(-1/4) (encoder-only)
    double branch_ratio_post = 0, branch_ratio_deep = 0;  ///< ||F(x)|| / ||residual|| at init
};
Relatives a4_8_relatives();

}  // namespace tutorial_values
