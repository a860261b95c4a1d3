// Computations of tutorial 15 (LayerNorm's Jacobian and curvature): the Jacobian of LayerNorm and
// RMSNorm from xg::jacobian, its eigenvalues and null space, Hessian-vector products through
// create_graph against finite differences, a Newton iteration and a gradient penalty.
#pragma once

#include <vector>

#include "core/engine/tensor.hpp"

namespace tutorial_values {

/// Eigenvalues of a small symmetric matrix (cyclic Jacobi rotations), ascending.
std::vector<double> symmetric_eigenvalues(const xg::Array& a);

/// LayerNorm (no affine) of one row x at `eps`: its Jacobian J = d LN(x) / dx from xg::jacobian,
/// the closed form rstd (I - 1 1^T / H - xhat xhat^T / H) (exact at eps = 0), and what J does to
/// the ones vector, to xhat and to x.
struct LayerNormJacobian {
    xg::Array x, xhat, jacobian;
    double rstd = 0;
    double closed_form_err = 0;          ///< max |J - closed form|; at eps > 0 the xhat term is scaled
    double ones_residual = 0;            ///< |J 1|
    double xhat_residual = 0;            ///< |J xhat| (0 at eps = 0; rstd eps / (var + eps) |xhat| else)
    double scale_residual = 0;           ///< |LN(3 x) - LN(x)|
    std::vector<double> eigenvalues;     ///< ascending; J is symmetric without an affine weight
    int rank = 0;                        ///< eigenvalues above 1e-12 rstd
};
LayerNormJacobian curvature_layer_norm_jacobian(double eps);

/// RMSNorm (no weight) of the same row: J = rrms (I - xhat xhat^T / H) at eps = 0, null along x.
struct RmsNormJacobian {
    xg::Array jacobian;
    std::vector<double> eigenvalues;
    double x_residual = 0;  ///< |J x|
    int rank = 0;
};
RmsNormJacobian curvature_rms_norm_jacobian(double eps);

/// The eigenvalue of LayerNorm's Jacobian along xhat as eps grows (0 at eps = 0).
struct EpsRow {
    double eps = 0, var = 0;
    double along_xhat = 0;   ///< xhat^T J xhat / |xhat|^2
    double predicted = 0;    ///< rstd eps / (var + eps)
};
std::vector<EpsRow> curvature_eps_rows();

/// L(x) = sum(c * tanh(LN(x) * w + b)) for a row of H = 6: its Hessian-vector product H v by
/// xg::hvp (create_graph), by the composed twin, and by central differences of the gradient.
struct HvpCheck {
    xg::Array hv;
    double twin_diff = 0;   ///< max |Hv(fused) - Hv(composed)|
    double fd_err = 0;      ///< max |Hv - (g(x + h v) - g(x - h v)) / 2h|, h = 1e-5
    double symmetry = 0;    ///< |u^T H v - v^T H u|
};
HvpCheck curvature_hvp();

/// Newton's method on f(x) = x^4 - 2 x^2 from x = 2 (DeZero's example): x <- x - f'(x) / f''(x),
/// both derivatives by xg::grad with create_graph.
std::vector<double> curvature_newton(int iterations);

/// A gradient penalty: P(w) = |dL/dx|^2 for L = sum(c * LN(x) * w) over a (3, 4) batch; dP/dw by
/// differentiating the gradient (create_graph) against central differences in w.
struct PenaltyCheck {
    double penalty = 0;
    xg::Array grad_w;
    double fd_err = 0;
};
PenaltyCheck curvature_gradient_penalty();

}  // namespace tutorial_values
