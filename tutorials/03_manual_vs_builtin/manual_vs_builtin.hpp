// Computations of tutorial 03 (A0.3, A1.4): a LayerNorm written from primitive ops against the
// library's fused one, and the paper walkthrough's NumPy-style class with a hand-written backward.
#pragma once

#include <string>

#include "core/tools/gradcheck.hpp"
#include "core/engine/tensor.hpp"
#include "nn/modules/module.hpp"

namespace tutorial_values {

using xg::Array;
using xg::Shape;
using xg::Tensor;

/// The blog's ManualLayerNorm: mean, var(unbiased=false), sqrt, affine - five graph nodes.
class ManualLayerNorm : public xg::nn::Module {
public:
    explicit ManualLayerNorm(std::size_t normalized_shape, double eps = 1e-5);
    Tensor forward(const Tensor& x) override;
    xg::nn::Parameter gamma, beta;
    double eps;
};

/// A0.3: ManualLayerNorm vs nn::LayerNorm(8) on randn(2, 4, 8) (seed 42), same gamma/beta.
struct ManualVsBuiltin {
    Shape x_shape, out_shape, gamma_shape, beta_shape;
    double max_out_diff = 0;
    double max_grad_x_diff = 0, max_grad_gamma_diff = 0, max_grad_beta_diff = 0;
    std::size_t manual_nodes = 0, builtin_nodes = 0;  ///< graph nodes between input and output
};
ManualVsBuiltin a0_3_manual_vs_builtin();

/// The paper walkthrough's NumPy class, in C++ on plain arrays (no autograd at all).
class NumpyStyleLayerNorm {
public:
    explicit NumpyStyleLayerNorm(std::size_t normalized_shape, double epsilon = 1e-8);
    Array forward(const Array& x);
    /// Returns dL/dx and fills grad_gamma, grad_beta (sums over every axis but the last).
    Array backward(const Array& grad_output);
    /// dL/dx in the compact form of docs/derivations/layernorm.md, from the same forward:
    /// rstd * (g - mean(g) - x_hat * mean(g * x_hat)) with g = grad_output * gamma.
    Array backward_compact(const Array& grad_output) const;
    void update(double learning_rate);

    std::size_t normalized_shape;
    double epsilon;
    Array gamma, beta, grad_gamma, grad_beta;

private:
    Array x_, mean_, var_, x_hat_;
};

/// A1.4: the class on x (32, 768), random grad_output, lr 0.001.
struct NumpyStyleCheck {
    Shape x_shape, y_shape, grad_input_shape, grad_gamma_shape;
    double max_diff_grad_input = 0, max_diff_grad_gamma = 0, max_diff_grad_beta = 0;  ///< vs autograd
    double max_diff_forward = 0;                   ///< vs the library's layer_norm (eps 1e-8)
    double fd_directional_rel_err_x = 0;           ///< central differences along random directions
    double fd_directional_rel_err_gamma = 0;
    double fd_directional_rel_err_beta = 0;
    double max_update_gamma = 0, max_update_beta = 0; ///< max |change| made by update(0.001)
    double update_vs_sgd = 0;                      ///< max |class update - optim::SGD step|
    Array dx_three_term_row0, dx_compact_row0;     ///< first 4 entries of row 0 of dL/dx, both forms
    double max_diff_compact_vs_three_term = 0;     ///< over all (32, 768) entries: rounding
    xg::GradcheckResult gradcheck;                 ///< xg::gradcheck of the library op, projection mode
};
NumpyStyleCheck a1_4_numpy_style();

}  // namespace tutorial_values
