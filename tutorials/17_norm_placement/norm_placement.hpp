// Computations of tutorial 17: where a Transformer block normalises, beyond Post-LN and Pre-LN.
// P4.1 (Sun et al. 2025, Curse of Depth and LayerNorm Scaling), P5.1 (Kim et al. 2025, Peri-LN),
// P6.1 (Wang et al. 2022, DeepNorm): the char GPT of tutorial 11 with every placement, at several
// depths, over seeds. P7.1 (Li and Arora 2020): weight decay on a scale-invariant loss against an
// exponentially growing learning rate. P8.1 (Brody et al. 2023): LayerNorm's projection and
// scaling, ablated in one attention layer on the majority task.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tools/gradcheck.hpp"
#include "nn/nn.hpp"
#include "tutorials/common/blocks.hpp"

namespace tutorial_values {

// ---- P4.1, P5.1, P6.1: the placements in the char GPT -------------------------------------------

struct PlacementConfig {
    std::string text_path = "/usr/share/common-licenses/GPL-3";
    double heldout_fraction = 0.1;
    std::size_t d_model = 32, n_heads = 4, context = 32, batch = 16;
    std::size_t steps = 300, warmup = 30;
    double lr = 3e-3;
    std::vector<std::size_t> depths{6, 12, 24};
    std::vector<std::uint64_t> seeds{1, 2, 3};
    std::vector<NormPlacement> placements{NormPlacement::post, NormPlacement::pre, NormPlacement::peri,
                                          NormPlacement::deepnorm, NormPlacement::pre_lns};
    std::size_t heldout_windows = 32;  ///< held-out windows the measurements use (0: all)
    bool progress = true;
};

/// One trained model (one placement, depth and seed).
struct PlacementRun {
    std::vector<double> variance_init, variance;  ///< per block: variance of its output (the residual stream)
    std::vector<double> grad_init, grad;          ///< per block: norm of the gradient of its parameters
    double max_activation_init = 0, max_activation = 0;  ///< largest |h| over every block's output
    double heldout = 0;                           ///< held-out loss after training (NaN: diverged)
    std::vector<double> removal;                  ///< per block: held-out loss without it - heldout
    bool diverged = false;
};

struct PlacementCell {
    NormPlacement placement = NormPlacement::pre;
    std::size_t depth = 0;
    std::vector<PlacementRun> runs;  ///< one per seed
};

struct PlacementStudy {
    std::size_t vocab = 0, heldout_chars = 0;
    std::vector<PlacementCell> cells;  ///< every depth, every placement (depth-major)
};

PlacementStudy placement_study(const PlacementConfig& config);

/// Gradcheck w.r.t. the input of a tiny block (d 4, 2 heads, block 2 of 3) with this placement.
xg::GradcheckResult placement_gradcheck(NormPlacement placement);

// ---- P7.1: Li and Arora's equivalence --------------------------------------------------------

/// A linear layer followed by LayerNorm without affine (scale invariant in W when eps = 0), then
/// a fixed random head; full-batch gradient descent on a synthetic classification.
struct ScaleInvarianceConfig {
    std::size_t samples = 256, d_in = 12, d_hidden = 8, classes = 4, steps = 400;
    double lr = 0.1, weight_decay = 0.01;
    std::uint64_t seed = 5;
};

struct EquivalenceRow {
    std::size_t step = 0;
    double loss_wd = 0, loss_schedule = 0;  ///< the two runs' training losses
    double norm_wd = 0, norm_schedule = 0;  ///< ||W|| of the two runs
    double lr_schedule = 0;                 ///< the rescaled learning rate lr (1 - lr wd)^(-2t-1)
    double direction_gap = 0;               ///< max |W/||W|| - W'/||W'|||, elementwise
};

struct Equivalence {
    double norm_eps = 0;
    std::vector<EquivalenceRow> rows;  ///< a few steps, for the table
    double max_direction_gap = 0, max_loss_gap = 0;  ///< over every step
};

/// Both runs, with LayerNorm's eps = `norm_eps`.
Equivalence li_arora(const ScaleInvarianceConfig& config, double norm_eps);

// ---- P8.1: Brody et al.'s decomposition of LayerNorm ----------------------------------------------

enum class MajorityNorm { layer_norm, projection, scaling, none };
std::string majority_norm_name(MajorityNorm norm);

struct MajorityConfig {
    std::size_t vocab = 12, length = 12, d_model = 4, batch = 64, steps = 300, test_sequences = 1000;
    std::size_t queries = 20000;  ///< random query directions for counting unselectable keys
    double lr = 1e-2;
    std::vector<std::uint64_t> seeds{1, 2, 3};
};

struct MajorityVariant {
    MajorityNorm norm = MajorityNorm::layer_norm;
    std::vector<double> accuracy;      ///< per seed, on fresh sequences
    std::vector<double> unselectable;  ///< per seed: keys that no query direction ranks first
};

/// Embedding -> norm -> one attention head -> the last position's output -> Linear -> the
/// majority token; every norm over the seeds.
std::vector<MajorityVariant> majority_ablation(const MajorityConfig& config);

/// Of the keys (rows of `keys`, (n, d)), how many are never the top score q.k, for q pointing at
/// each key (from the origin and from the keys' centroid) and `queries` random Gaussian directions
/// (drawn from `seed`). An estimate from above: a key that wins only in a narrow cone of queries
/// can be missed; for keys on a sphere about the origin it is exact (0).
std::size_t count_unselectable(const xg::Array& keys, std::size_t queries, std::uint64_t seed);

}  // namespace tutorial_values
