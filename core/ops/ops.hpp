// Primitive differentiable ops. Each op's backward closure sits right under its forward in the
// matching core/ops/*.cpp file, with its formula in a one-line comment; derivations: docs/autograd.md.
// Axes may be negative (counted from the end), as in PyTorch.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <type_traits>
#include <vector>

#include "core/engine/tensor.hpp"

namespace xg {

/// Integer indices (gather, Embedding, cross-entropy targets).
using IndexArray = xt::xarray<std::int64_t>;
/// Boolean masks (masked_fill); broadcast against the tensor.
using Mask = xt::xarray<bool>;
/// Axes for reductions and permute; negative values count from the end.
using Axes = std::vector<int>;

/// Integer indices as a function argument: an IndexArray is used as it is; a Tensor or an Array
/// of doubles (the type every xgrad value has) is accepted only if each element is a whole number
/// in the int64 range, else xg::Error names the operation, the value and its position. So a
/// double never silently truncates into an index (0.9999999 would otherwise select class 0).
/// Build one from an IndexArray, a Tensor, an Array, or a braced list `{0, 2, 1}`. It refers to
/// its argument, so it is meant only as a parameter type.
class Indices {
public:
    /// Integer indices, used as given.
    Indices(const IndexArray& indices) : indices_(&indices) {}
    /// Whole numbers held as doubles (checked when an op reads them).
    Indices(const Array& values) : values_(&values) {}
    /// Whole numbers held in a tensor (checked when an op reads them).
    Indices(const Tensor& values) : values_(&values.value()) {}
    /// A braced list of indices, e.g. {0, 2, 1}.
    Indices(std::initializer_list<std::int64_t> list) : owned_(IndexArray(list)), indices_(&*owned_) {}
    /// A copy refers to what `other` refers to (and owns a copy of a braced list).
    Indices(const Indices& other);
    /// Not assignable: it is a parameter type.
    Indices& operator=(const Indices&) = delete;

    /// The indices; doubles are converted after the whole-number check, which throws xg::Error
    /// naming `op`.
    IndexArray get(const std::string& op) const;

private:
    std::optional<IndexArray> owned_;
    const IndexArray* indices_ = nullptr;
    const Array* values_ = nullptr;
};

/// Whole numbers held in a tensor as an IndexArray (e.g. labels for a TensorDataset); throws
/// xg::Error naming the first value that is not a whole number in the int64 range.
IndexArray to_indices(const Tensor& values);
/// The same for an Array of doubles.
IndexArray to_indices(const Array& values);

// ---- broadcasting helpers (shared by ops and modules) -------------------------------------

// broadcast_shapes(a, b, op), the NumPy broadcast of two shapes, is in core/engine/tensor.hpp.
/// Sums `grad` over the axes broadcasting added or stretched so it has `shape`: the backward of
/// broadcasting (flashlight's sumAs, tinygrad's Expand backward). Moves `grad` through when it
/// already has `shape`.
Array sum_to(Array grad, const Shape& shape);
/// sum_to as an op of the graph: sums `a` over the axes broadcasting added or stretched so it has
/// `shape`; its backward is expand (and expand's is sum_to). Returns `a` itself when it already
/// has `shape`; throws naming both shapes when `shape` does not broadcast to a's.
Tensor sum_to(const Tensor& a, const Shape& shape);
/// `a` broadcast to `shape` as a new tensor (tinygrad's Expand): its backward is sum_to.
Tensor expand(const Tensor& a, const Shape& shape);
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

/// Matrix product: (m,k)@(k,n); batched (...,m,k)@(...,k,n) with broadcast batch axes. A 1-D
/// operand follows torch.matmul: (k,)@(k,) is the 0-D dot product, (...,m,k)@(k,) gives (...,m)
/// and (k,)@(...,k,n) gives (...,n).
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
Tensor gather(const Tensor& a, int axis, const Indices& index);
/// Replaces elements where mask (broadcast to a's shape) is true by `value`.
Tensor masked_fill(const Tensor& a, const Mask& mask, double value);

// ---- softmax ------------------------------------------------------------------------------

/// exp(a - max) / sum(exp(a - max)) along axis: stable for logits of any magnitude.
Tensor softmax(const Tensor& a, int axis = -1);
/// a - max - log(sum(exp(a - max))) along axis.
Tensor log_softmax(const Tensor& a, int axis = -1);

// ---- trigonometry, clamp, min, selection (ops_elementwise.cpp, ops_reduce.cpp, ops_select.cpp) --

/// sin(a) element-wise.
Tensor sin(const Tensor& a);
/// cos(a) element-wise.
Tensor cos(const Tensor& a);
/// a limited to [min, max] element-wise (either bound may be absent, as torch.clamp); the
/// gradient is 1 where min <= a <= max and 0 where a bound applied; NaN stays NaN (gradient 0).
/// Throws xg::Error when both bounds are absent or a bound is NaN.
Tensor clamp(const Tensor& a, std::optional<double> min, std::optional<double> max);
/// The larger of a and b element-wise, broadcast; NaN if either is NaN. Where a == b the
/// gradient is split half and half (as torch.maximum).
Tensor maximum(const Tensor& a, const Tensor& b);
/// The smaller of a and b element-wise, broadcast; NaN if either is NaN; ties split the gradient.
Tensor minimum(const Tensor& a, const Tensor& b);
/// Minimum over all elements; ties share the gradient equally (like torch.amin); NaN propagates.
Tensor min(const Tensor& a);
/// Minimum over `axes`; ties share the gradient equally.
Tensor min(const Tensor& a, const Axes& axes, bool keepdim = false);
/// Elements of a where cond is true, of b elsewhere; cond, a and b broadcast together. The
/// gradient goes to a where cond holds and to b elsewhere (each summed to its own shape).
/// Call it as xg::where: the Mask argument makes an unqualified call find xt::where as well
/// (argument-dependent lookup), which then fails to compile.
Tensor where(const Mask& cond, const Tensor& a, const Tensor& b);
/// The entries of a at `index` (1-D) along `axis`, in that order (repeats allowed), as
/// torch.index_select; backward adds the gradient back into the rows read.
Tensor index_select(const Tensor& a, int axis, const Indices& index);

/// Flat index of the largest element (the first one on ties; NaN counts as largest), 0-D.
/// Not differentiable. Throws on an empty tensor.
IndexArray argmax(const Tensor& a);
/// Index of the largest element along `axis` (the first on ties; NaN counts as largest).
IndexArray argmax(const Tensor& a, int axis, bool keepdim = false);
/// Flat index of the smallest element (the first on ties; NaN counts as smallest), 0-D.
IndexArray argmin(const Tensor& a);
/// Index of the smallest element along `axis` (the first on ties; NaN counts as smallest).
IndexArray argmin(const Tensor& a, int axis, bool keepdim = false);

/// One axis given as a plain integer, `mean(x, -1)`: the same as the Axes overloads with {axis}.
/// (Templates so that `sum(x, {})` still means every axis; bool is not an axis.)
template <class Int, class = std::enable_if_t<std::is_integral<Int>::value && !std::is_same<Int, bool>::value>>
Tensor sum(const Tensor& a, Int axis, bool keepdim = false) { return sum(a, Axes{static_cast<int>(axis)}, keepdim); }
/// mean over one axis.
template <class Int, class = std::enable_if_t<std::is_integral<Int>::value && !std::is_same<Int, bool>::value>>
Tensor mean(const Tensor& a, Int axis, bool keepdim = false) { return mean(a, Axes{static_cast<int>(axis)}, keepdim); }
/// var over one axis.
template <class Int, class = std::enable_if_t<std::is_integral<Int>::value && !std::is_same<Int, bool>::value>>
Tensor var(const Tensor& a, Int axis, bool unbiased = true, bool keepdim = false) {
    return var(a, Axes{static_cast<int>(axis)}, unbiased, keepdim);
}
/// max over one axis.
template <class Int, class = std::enable_if_t<std::is_integral<Int>::value && !std::is_same<Int, bool>::value>>
Tensor max(const Tensor& a, Int axis, bool keepdim = false) { return max(a, Axes{static_cast<int>(axis)}, keepdim); }
/// min over one axis.
template <class Int, class = std::enable_if_t<std::is_integral<Int>::value && !std::is_same<Int, bool>::value>>
Tensor min(const Tensor& a, Int axis, bool keepdim = false) { return min(a, Axes{static_cast<int>(axis)}, keepdim); }

}  // namespace xg
