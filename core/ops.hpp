// Primitive differentiable ops. Each op's backward closure sits right under its forward in the
// matching ops_*.cpp file, with its formula in a one-line comment; derivations: docs/autograd.md.
// Axes may be negative (counted from the end), as in PyTorch.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.hpp"

namespace xg {

/// Integer indices (gather, Embedding, cross-entropy targets).
using IndexArray = xt::xarray<std::int64_t>;
/// Boolean masks (masked_fill); broadcast against the tensor.
using Mask = xt::xarray<bool>;
/// Axes for reductions and permute; negative values count from the end.
using Axes = std::vector<int>;

// ---- broadcasting helpers (shared by ops and modules) -------------------------------------

/// NumPy broadcast of two shapes; throws naming `op` and both shapes when they do not broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
/// Sums `grad` over the broadcast axes so it has `shape` (the backward of broadcasting).
Array sum_to(const Array& grad, const Shape& shape);
/// Normalises a possibly negative axis against `ndim`; throws naming `op` when out of range.
std::size_t normalize_axis(int axis, std::size_t ndim, const char* op);

// ---- element-wise binary (NumPy broadcasting) ---------------------------------------------

/// a + b with NumPy broadcasting; throws xg::Error naming both shapes when they do not broadcast.
Tensor add(const Tensor& a, const Tensor& b);
/// a - b, broadcast.
Tensor sub(const Tensor& a, const Tensor& b);
/// a * b element-wise, broadcast.
Tensor mul(const Tensor& a, const Tensor& b);
/// a / b element-wise, broadcast (division by zero gives inf/NaN as in IEEE arithmetic).
Tensor div(const Tensor& a, const Tensor& b);

/// add(a, b).
Tensor operator+(const Tensor& a, const Tensor& b);
/// sub(a, b).
Tensor operator-(const Tensor& a, const Tensor& b);
/// mul(a, b).
Tensor operator*(const Tensor& a, const Tensor& b);
/// div(a, b).
Tensor operator/(const Tensor& a, const Tensor& b);
/// a + b with b a constant (no gradient).
Tensor operator+(const Tensor& a, double b);
/// a - b with b a constant.
Tensor operator-(const Tensor& a, double b);
/// a * b with b a constant.
Tensor operator*(const Tensor& a, double b);
/// a / b with b a constant.
Tensor operator/(const Tensor& a, double b);
/// a + b with a a constant.
Tensor operator+(double a, const Tensor& b);
/// a - b with a a constant.
Tensor operator-(double a, const Tensor& b);
/// a * b with a a constant.
Tensor operator*(double a, const Tensor& b);
/// a / b with a a constant.
Tensor operator/(double a, const Tensor& b);
/// neg(a).
Tensor operator-(const Tensor& a);

// ---- element-wise unary -------------------------------------------------------------------

/// -a (same shape).
Tensor neg(const Tensor& a);
/// a^exponent element-wise, constant exponent; for exponent 0 the gradient is 0 everywhere (PyTorch).
Tensor pow(const Tensor& a, double exponent);
/// e^a element-wise.
Tensor exp(const Tensor& a);
/// Natural logarithm element-wise (log 0 = -inf, negative -> NaN, as IEEE).
Tensor log(const Tensor& a);
/// Square root element-wise.
Tensor sqrt(const Tensor& a);
/// Hyperbolic tangent element-wise.
Tensor tanh(const Tensor& a);
/// The error function element-wise.
Tensor erf(const Tensor& a);
/// max(a, 0) element-wise; gradient 0 at a = 0 (as PyTorch); NaN stays NaN and passes its gradient.
Tensor relu(const Tensor& a);
/// 1 / (1 + e^-a) element-wise.
Tensor sigmoid(const Tensor& a);
/// |a| element-wise; gradient sign(a), 0 at a = 0.
Tensor abs(const Tensor& a);

// ---- linear algebra -----------------------------------------------------------------------

/// Matrix product: (m,k)@(k,n); batched (...,m,k)@(...,k,n) with broadcast batch axes.
Tensor matmul(const Tensor& a, const Tensor& b);

// ---- reductions ---------------------------------------------------------------------------

/// Sum of all elements (a 0-D tensor).
Tensor sum(const Tensor& a);
/// Sum over `axes` (kept as extent 1 when keepdim); throws on an out-of-range or repeated axis.
Tensor sum(const Tensor& a, const Axes& axes, bool keepdim = false);
/// Mean of all elements (a 0-D tensor).
Tensor mean(const Tensor& a);
/// Mean over `axes` (kept as extent 1 when keepdim).
Tensor mean(const Tensor& a, const Axes& axes, bool keepdim = false);
/// Variance over `axes`; divides by N-1 when unbiased, else by N (two-pass, robust to large means).
Tensor var(const Tensor& a, const Axes& axes, bool unbiased = true, bool keepdim = false);
/// Maximum over all elements, as torch.max(a): the k tied maxima get 1/k of the gradient each; a
/// NaN makes the maximum NaN, and the NaNs share the gradient.
Tensor max(const Tensor& a);
/// Maximum over `axes`, as torch.amax(a, axes): per slice, tied maxima share the gradient equally
/// and NaN propagates as in max(a) (torch.amax would give the whole slice a NaN gradient;
/// torch.max(a, dim) sends it all to one index).
Tensor max(const Tensor& a, const Axes& axes, bool keepdim = false);

// ---- shape --------------------------------------------------------------------------------

/// New shape with the same number of elements; one entry may be -1 (inferred).
Tensor reshape(const Tensor& a, const std::vector<long>& shape);
/// Swaps two axes.
Tensor transpose(const Tensor& a, int axis0, int axis1);
/// Reorders all axes: output axis i is input axis order[i]; order must be a permutation.
Tensor permute(const Tensor& a, const Axes& order);
/// Inserts an axis of extent 1 at `axis` (may be dim() for the end).
Tensor unsqueeze(const Tensor& a, int axis);
/// Removes `axis`, which must have extent 1.
Tensor squeeze(const Tensor& a, int axis);
/// Elements [start, start+length) along `axis`; a negative start counts from the end (torch.narrow).
Tensor narrow(const Tensor& a, int axis, std::int64_t start, std::int64_t length);
/// Elements start, start+step, ... below end along `axis` (Python a[..., start:end:step]); negative
/// bounds count from the end, the step must be positive.
Tensor slice(const Tensor& a, int axis, std::int64_t start, std::int64_t end, std::int64_t step = 1);
/// Concatenates along an existing axis.
Tensor cat(const std::vector<Tensor>& tensors, int axis = 0);
/// Stacks equal-shaped tensors along a new axis.
Tensor stack(const std::vector<Tensor>& tensors, int axis = 0);
/// out[i][j][k] = a[i][index[i][j][k]][k] for axis 1 (torch.gather); index has a's rank.
Tensor gather(const Tensor& a, int axis, const IndexArray& index);
/// Replaces elements where mask (broadcast to a's shape) is true by `value`.
Tensor masked_fill(const Tensor& a, const Mask& mask, double value);

// ---- softmax ------------------------------------------------------------------------------

/// exp(a - max) / sum(exp(a - max)) along axis: stable for logits of any magnitude.
Tensor softmax(const Tensor& a, int axis = -1);
/// a - max - log(sum(exp(a - max))) along axis.
Tensor log_softmax(const Tensor& a, int axis = -1);

}  // namespace xg
