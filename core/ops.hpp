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
using Axes = std::vector<int>;

// ---- broadcasting helpers (shared by ops and modules) -------------------------------------

/// NumPy broadcast of two shapes; throws naming `op` and both shapes when they do not broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
/// Sums `grad` over the broadcast axes so it has `shape` (the backward of broadcasting).
Array sum_to(const Array& grad, const Shape& shape);
/// Normalises a possibly negative axis against `ndim`; throws naming `op` when out of range.
std::size_t normalize_axis(int axis, std::size_t ndim, const char* op);

// ---- element-wise binary (NumPy broadcasting) ---------------------------------------------

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);
Tensor operator-(const Tensor& a);

// ---- element-wise unary -------------------------------------------------------------------

Tensor neg(const Tensor& a);
Tensor pow(const Tensor& a, double exponent);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor erf(const Tensor& a);
Tensor relu(const Tensor& a);
Tensor sigmoid(const Tensor& a);
Tensor abs(const Tensor& a);

// ---- linear algebra -----------------------------------------------------------------------

/// Matrix product: (m,k)@(k,n); batched (...,m,k)@(...,k,n) with broadcast batch axes.
Tensor matmul(const Tensor& a, const Tensor& b);

// ---- reductions ---------------------------------------------------------------------------

/// Sum of all elements (a 0-D tensor).
Tensor sum(const Tensor& a);
Tensor sum(const Tensor& a, const Axes& axes, bool keepdim = false);
Tensor mean(const Tensor& a);
Tensor mean(const Tensor& a, const Axes& axes, bool keepdim = false);
/// Variance over `axes`; divides by N-1 when unbiased, else by N (two-pass, robust to large means).
Tensor var(const Tensor& a, const Axes& axes, bool unbiased = true, bool keepdim = false);
/// Maximum over all elements; ties share the gradient equally (like torch.amax).
Tensor max(const Tensor& a);
Tensor max(const Tensor& a, const Axes& axes, bool keepdim = false);

// ---- shape --------------------------------------------------------------------------------

/// New shape with the same number of elements; one entry may be -1 (inferred).
Tensor reshape(const Tensor& a, const std::vector<long>& shape);
Tensor transpose(const Tensor& a, int axis0, int axis1);
Tensor permute(const Tensor& a, const Axes& order);
Tensor unsqueeze(const Tensor& a, int axis);
/// Removes `axis`, which must have extent 1.
Tensor squeeze(const Tensor& a, int axis);
/// Elements [start, start+length) along `axis`.
Tensor narrow(const Tensor& a, int axis, std::size_t start, std::size_t length);
/// Elements start, start+step, ... below end along `axis` (Python a[..., start:end:step]).
Tensor slice(const Tensor& a, int axis, std::size_t start, std::size_t end, std::size_t step = 1);
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
