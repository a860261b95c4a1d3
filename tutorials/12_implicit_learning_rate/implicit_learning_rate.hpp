// Computations of tutorial 12: the implicit learning rate of LayerNorm (A1.7). A layer followed by
// LayerNorm gives the same output for W and for a*W, so its gradient scales as 1/a; under SGD |W|
// grows and the angular step on W/|W| shrinks with lr/|W|^2. The same layer without LayerNorm
// shows none of this.
#pragma once

#include <cstddef>
#include <vector>

#include "core/engine/tensor.hpp"

namespace tutorial_values {

/// The regression task: x (50000, 16) ~ N(0, 1), y = tanh(x A^T) + 0.3 N(0, 1) for a fixed teacher
/// A (4, 16) (Generator(12)).
struct ImplicitLrData {
    xg::Array x, y;
};
ImplicitLrData a1_7_data();

/// The task's sizes and SGD settings (the same for both networks).
constexpr std::size_t kImplicitLrSamples = 50000, kImplicitLrHidden = 32, kImplicitLrBatch = 16, kImplicitLrFixedBatch = 512;
constexpr double kImplicitLrLr = 1.0;
constexpr double kImplicitLrNoise = 0.3;

/// The loss and the gradient of W (the first Linear's weight, no bias) on the first 512 samples,
/// at W = scale * W0, W0 the initial W of Linear(16, 32, no bias) -> [LayerNorm(32, eps)] -> Tanh
/// -> Linear(32, 4) (manual_seed(7)).
struct ImplicitLrRescaled {
    double scale = 0, loss = 0, w_norm = 0, g_norm = 0;
    double cosine = 0;  ///< <grad W, W> / (|grad W| |W|)
};
/// One entry per scale, in order, all from the same network (layer_norm: with LayerNorm(32, eps)).
std::vector<ImplicitLrRescaled> a1_7_rescaled(const ImplicitLrData& d, bool layer_norm, double eps,
                                              const std::vector<double>& scales);

/// SGD (lr 1) on minibatches of 16 drawn at random (Generator(3), the same draws for both networks).
struct ImplicitLrTrajectory {
    std::vector<double> w_norm;       ///< |W| after each step (index 0: before training)
    std::vector<double> angle;        ///< angle between W before and after each step, degrees
    std::vector<double> loss;         ///< minibatch loss of each step
    std::vector<double> grad_norm;    ///< |grad W| of each step (before it)
    double max_cosine = 0;            ///< largest |cos(grad W, W)| seen
    double max_pythagoras_error = 0;  ///< largest relative error of |W_next|^2 = |W|^2 + lr^2 |g|^2
};
/// layer_norm: with LayerNorm(32) at PyTorch's default eps 1e-5.
ImplicitLrTrajectory a1_7_sgd(bool layer_norm, std::size_t steps);

/// The mean of v[from, to).
double a1_7_window_mean(const std::vector<double>& v, std::size_t from, std::size_t to);

/// The verdict of the tutorial's last step, from steps 101-300 against steps 1001-`steps`: |W|
/// "grows" by 10 % or more, the angle per step "falls" to 0.8 of its value or less, and it "falls
/// with lr/|W|^2" when its ratio is within 25 % of that of lr/|W|^2; the LayerNorm run must also
/// keep the gradient orthogonal to W (largest |cos| < 1e-4). Needs steps > 1000.
struct ImplicitLrVerdict {
    double ln_w_ratio = 0, ln_angle_ratio = 0;        ///< |W| and mean angle, late window over early one
    double ln_lr_ratio = 0;                           ///< lr/|W|^2 at the end over its value at step 300
    double plain_w_ratio = 0, plain_angle_ratio = 0;  ///< the same without LayerNorm
    bool ln_shows = false;       ///< with LayerNorm |W| grows and the angle falls with lr/|W|^2
    bool plain_neither = false;  ///< without it |W| does not grow and the angle does not fall
};
ImplicitLrVerdict a1_7_verdict(const ImplicitLrTrajectory& ln, const ImplicitLrTrajectory& plain, std::size_t steps);

}  // namespace tutorial_values
