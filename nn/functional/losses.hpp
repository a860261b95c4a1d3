// Loss functions (torch.nn.functional names; the modules are in nn/modules/losses.hpp). Each is one fused graph node with a hand-derived
// backward; derivations in docs/derivations/losses.md (cross_entropy: softmax minus the
// smoothed one-hot target, with class weights and ignored rows).
#pragma once

#include <type_traits>

#include "core/ops/ops.hpp"

namespace xg::nn {

/// How per-element losses are combined, as PyTorch's `reduction=` argument.
enum class Reduction { none, mean, sum };

/// Options of cross_entropy beyond logits and targets, in the style of the PyTorch C++ frontend's
/// `torch::nn::functional::CrossEntropyFuncOptions`: each setter returns the options so calls
/// chain, and the getter has the setter's name:
///
///     nn::cross_entropy(logits, targets, nn::CrossEntropyFuncOptions().weight(w).ignore_index(0));
///
/// An options struct rather than more trailing parameters because a caller who only wants
/// ignore_index should not have to spell out reduction, label_smoothing and an undefined weight.
class CrossEntropyFuncOptions {
public:
    /// Per-class rescaling weights (C,), or an undefined Tensor (the default) for all ones. Used
    /// as a constant: no gradient flows to it, even if it requires one.
    CrossEntropyFuncOptions& weight(const Tensor& w) {
        weight_ = w;
        return *this;
    }
    /// The class weights (undefined when not set).
    const Tensor& weight() const noexcept { return weight_; }
    /// Rows whose target equals this contribute no loss and no gradient (default -100, as PyTorch).
    CrossEntropyFuncOptions& ignore_index(std::int64_t index) {
        ignore_index_ = index;
        return *this;
    }
    /// Not from a floating-point number: it would be truncated silently (say -100, not -100.0).
    template <class F, class = std::enable_if_t<std::is_floating_point<F>::value>>
    CrossEntropyFuncOptions& ignore_index(F) = delete;
    /// The ignored target value.
    std::int64_t ignore_index() const noexcept { return ignore_index_; }
    /// How per-row losses are combined (default mean).
    CrossEntropyFuncOptions& reduction(Reduction r) {
        reduction_ = r;
        return *this;
    }
    /// The reduction.
    Reduction reduction() const noexcept { return reduction_; }
    /// Label smoothing in [0, 1] (default 0).
    CrossEntropyFuncOptions& label_smoothing(double ls) {
        label_smoothing_ = ls;
        return *this;
    }
    /// The label smoothing.
    double label_smoothing() const noexcept { return label_smoothing_; }

private:
    Tensor weight_;
    std::int64_t ignore_index_ = -100;
    Reduction reduction_ = Reduction::mean;
    double label_smoothing_ = 0.0;
};

/// Cross-entropy of logits (N, C) against class indices targets (N,), exactly as PyTorch's
/// F.cross_entropy(logits, targets, weight, ignore_index, reduction, label_smoothing) for
/// class-index targets. PyTorch's other layouts work too: logits (N, C, d1, ..., dk) with targets
/// (N, d1, ..., dk) (classes on axis 1, one loss per position; `none` gives the targets' shape,
/// `mean` averages over every counted position), and unbatched (C,) with a 0-D target. Sequence
/// logits (B, T, C) go in as `transpose(logits, 1, 2)`, as in PyTorch. Targets are integer
/// indices: an IndexArray, `{0, 2, 1}`, or a Tensor/Array of whole numbers (xg::Indices; a
/// fractional value throws instead of truncating). With l = log_softmax(logits), s =
/// label_smoothing, w = weight (all ones when undefined), per row n:
///
///     loss_n = (1 - s) w[t_n] (-l[n, t_n]) + (s / C) sum_j w[j] (-l[n, j])
///
/// and loss_n = 0 for rows with t_n == ignore_index (no gradient either). `none` gives (N,),
/// `sum` the sum, `mean` the sum divided by sum of w[t_n] over the non-ignored rows (their count
/// when unweighted) - PyTorch's weighted mean, so the smoothing term is divided by it too.
///
/// A masked logit of -inf is fine (its probability is 0) unless it is the target's.
///
/// Throws xg::Error naming cross_entropy and the shapes/values when: shapes are not one of the
/// layouts above; a target is not a whole number, or is outside [0, C) and not ignore_index;
/// weight is not (C,) or not finite; label_smoothing is outside [0, 1]; or `mean` has nothing to divide by - N = 0, every target
/// ignored, or the weights of the counted targets summing to 0. PyTorch divides by 0 there and
/// returns NaN (or inf); we throw instead, since a NaN loss would only surface steps later as NaN
/// parameters. Use `sum` if an all-padding batch is legitimate (it gives 0).
Tensor cross_entropy(const Tensor& logits, const Indices& targets, const CrossEntropyFuncOptions& options);

/// cross_entropy with no class weights and PyTorch's default ignore_index = -100 (so a target of
/// -100 is ignored; every other target must be in [0, C)). Per row:
/// (1 - ls) * (-log p[target]) + ls * mean_over_classes(-log p), p = softmax(logits); `mean`
/// divides by the number of non-ignored rows; `none` gives (N,).
Tensor cross_entropy(const Tensor& logits, const Indices& targets, Reduction reduction = Reduction::mean,
                     double label_smoothing = 0.0);

/// Mean squared error (input - target)^2 over same-shaped tensors; both may need gradients.
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean);

namespace functional {
using nn::CrossEntropyFuncOptions;
using nn::cross_entropy;
using nn::mse_loss;
}  // namespace functional

}  // namespace xg::nn
