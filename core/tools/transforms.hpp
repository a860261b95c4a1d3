// Function transforms for small problems, built on xg::grad (torch.autograd.functional's):
// vector-Jacobian and Jacobian-vector products, full Jacobians and Hessians, Hessian-vector
// products. Each takes a function of one tensor; full Jacobians and Hessians cost one backward
// per output element, so they are for small shapes (tutorials, tests, Newton steps).
#pragma once

#include <functional>
#include <utility>

#include "core/engine/tensor.hpp"

namespace xg {

/// A function of one tensor, as the transforms take it.
using TensorFunction = std::function<Tensor(const Tensor&)>;

/// (f(x), vᵀ J_f(x)): `v` has f(x)'s shape, the product x's. Throws xg::Error naming the shapes
/// when they differ.
std::pair<Tensor, Tensor> vjp(const TensorFunction& f, const Tensor& x, const Tensor& v);
/// (f(x), J_f(x) u) by the double-vjp trick: the vjp g(w) = J^T w is linear in w, so its own vjp
/// with u is J u. Needs a double backward of every op f uses.
std::pair<Tensor, Tensor> jvp(const TensorFunction& f, const Tensor& x, const Tensor& u);
/// J_f(x) with shape f(x).shape + x.shape (one backward per element of f(x)).
Tensor jacobian(const TensorFunction& f, const Tensor& x);
/// The Hessian of a one-element f at x, shape x.shape + x.shape (one double backward per
/// element of x).
Tensor hessian(const TensorFunction& f, const Tensor& x);
/// (f(x), H_f(x) v) for a one-element f, without forming H: the gradient of <∇f(x), v>.
std::pair<Tensor, Tensor> hvp(const TensorFunction& f, const Tensor& x, const Tensor& v);

}  // namespace xg
