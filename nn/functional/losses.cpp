#include "nn/functional/losses.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include <fmt/format.h>
#include <xtensor/xmanipulation.hpp>
#include <xtensor/xview.hpp>

#include "core/ops/composed_backward.hpp"
#include "nn/fast/cross_entropy.hpp"
#include "nn/functional/kernel_storage.hpp"
#include "nn/functional/tier.hpp"
#include "nn/reference/cross_entropy.hpp"

namespace xg::nn {

namespace {

// Checks the (N, C) case's arguments and returns the class weights (empty when unweighted, so
// that path keeps exactly the unweighted arithmetic). Errors name the caller's logits shape
// `shown` (and a flat position in the targets).
std::vector<double> check_cross_entropy(const Shape& s, const IndexArray& targets, const CrossEntropyFuncOptions& options,
                                        const Shape& shown) {
    const std::size_t n = s[0], classes = s[1];
    const double label_smoothing = options.label_smoothing();
    const std::int64_t ignore_index = options.ignore_index();
    if (classes == 0) fail("cross_entropy", fmt::format("logits {} have no classes", shape_str(shown)));
    if (!(label_smoothing >= 0.0 && label_smoothing <= 1.0)) {
        fail("cross_entropy", fmt::format("label_smoothing must be in [0, 1], got {}", label_smoothing));
    }
    if (options.reduction() == Reduction::mean && n == 0) {
        fail("cross_entropy", "mean over an empty batch (N = 0) is undefined");
    }
    for (std::size_t i = 0; i < n; ++i) {
        if (targets(i) == ignore_index) continue;
        if (targets(i) < 0 || targets(i) >= static_cast<std::int64_t>(classes)) {
            fail("cross_entropy",
                 fmt::format("target {} at position {} is out of range for C = {} classes (logits {}) and is not "
                             "ignore_index = {}",
                             targets(i), i, classes, shape_str(shown), ignore_index));
        }
    }
    std::vector<double> weight;
    if (options.weight().defined()) {
        const Array& w = options.weight().value();
        const Shape ws(w.shape().begin(), w.shape().end());
        if (ws != Shape{classes}) {
            fail("cross_entropy", fmt::format("weight must have shape (C,) = ({},) for logits {}, got weight {}",
                                              classes, shape_str(shown), shape_str(ws)));
        }
        weight.assign(w.data(), w.data() + classes);
        for (std::size_t j = 0; j < classes; ++j) {
            if (!std::isfinite(weight[j])) {
                fail("cross_entropy",
                     fmt::format("weight[{}] = {} is not finite (weight {})", j, weight[j], shape_str(ws)));
            }
        }
    }
    return weight;
}

// The class weights as the coefficients of cross_entropy_composed need them (empty: all 1).
std::vector<double> cross_entropy_coefficients_weight(const CrossEntropyFuncOptions& options, std::size_t classes) {
    std::vector<double> w;
    if (options.weight().defined()) w.assign(options.weight().data(), options.weight().data() + classes);
    return w;
}

// The composed twin of cross_entropy_rows for its create_graph backward: with the constant
// coefficients A_ij = (1 - ls) w_t [j = t_i] + (ls / C) w_j (rows with t_i = ignore_index all 0),
// loss_i = -sum_j A_ij log_softmax(x)_ij, then reduced (mean: times the forward's 1 / sum w_t).
Tensor cross_entropy_composed(const Tensor& logits, const IndexArray& targets, std::int64_t ignore_index,
                              const std::vector<double>& weight, double label_smoothing, Reduction reduction, double scale) {
    const std::size_t n = logits.size(0), classes = logits.size(1);
    const double smooth = label_smoothing / static_cast<double>(classes);
    Array coef = xt::zeros<double>({n, classes});
    for (std::size_t i = 0; i < n; ++i) {
        if (targets(i) == ignore_index) continue;
        double* row = coef.data() + i * classes;
        for (std::size_t j = 0; j < classes; ++j) row[j] = smooth * (weight.empty() ? 1.0 : weight[j]);
        const auto t = static_cast<std::size_t>(targets(i));
        row[t] += (1.0 - label_smoothing) * (weight.empty() ? 1.0 : weight[t]);
    }
    const Tensor per_row = -sum(Tensor(std::move(coef), logits.dtype()) * log_softmax(logits, 1), {1});
    if (reduction == Reduction::none) return per_row;
    return reduction == Reduction::mean ? sum(per_row) * scale : sum(per_row);
}

// The (N, C) case, which every other layout is brought to; errors name the caller's logits shape
// `shown`. Derivation: docs/derivations/losses.md.
Tensor cross_entropy_rows(const Tensor& logits, const IndexArray& targets, const CrossEntropyFuncOptions& options,
                          const Shape& shown) {
    const Shape s = logits.shape();
    const std::size_t n = s[0], classes = s[1];
    const Reduction reduction = options.reduction();
    const double label_smoothing = options.label_smoothing();
    const std::int64_t ignore_index = options.ignore_index();
    std::vector<double> weight = check_cross_entropy(s, targets, options, shown);
    // loss_n = -(1 - s) w[t_n] l[n, t_n] - (s / C) sum_j w_j l[n, j], l = log_softmax(z); 0 if ignored
    const double* w = weight.empty() ? nullptr : weight.data();
    Array log_probs = Array::from_shape({n, classes}), per_row = Array::from_shape({n});
    // logits of a narrower storage type are widened into a buffer that lives for this call only (not
    // a mirror kept with the node): the kernels compute in double, and the result and gradient are
    // rounded once into the logits' storage
    const Dtype dtype = logits.dtype();
    const bool narrow = dtype != kFloat64;
    const Array widened = narrow ? detail::float64_values(logits) : Array();
    detail::by_tier(reference::cross_entropy_forward, fast::cross_entropy_forward,
                    narrow ? widened.data() : logits.value().data(), targets.data(), w,
                    label_smoothing, ignore_index, n, classes, log_probs.data(), per_row.data());
    double denominator = 0.0;  // of mean: sum of w[t] (count when unweighted) over counted rows
    std::size_t counted = 0;   // rows whose target is not ignore_index
    for (std::size_t i = 0; i < n; ++i) {
        if (targets(i) == ignore_index) continue;
        denominator += weight.empty() ? 1.0 : weight[static_cast<std::size_t>(targets(i))];
        ++counted;
    }

    Array out;
    double scale = 1.0;  // d out / d per_row (for mean and sum)
    if (reduction == Reduction::none) {
        out = std::move(per_row);
    } else {
        double total = 0.0;
        for (std::size_t i = 0; i < n; ++i) total += per_row(i);
        if (reduction == Reduction::mean) {
            if (counted == 0) {
                fail("cross_entropy", fmt::format("mean over no rows: all {} targets equal ignore_index = {} (PyTorch "
                                                  "would return NaN; use reduction sum to get 0)",
                                                  n, ignore_index));
            }
            if (denominator == 0.0) {
                fail("cross_entropy", fmt::format("mean divides by the sum of weight[target] over the {} non-ignored "
                                                  "rows, which is 0",
                                                  counted));
            }
            scale = 1.0 / denominator;
        }
        out = Array(total * scale);
    }
    std::vector<SavedInfo> saved{{"log_probs", {n, classes}}};
    if (!weight.empty()) saved.push_back({"weight", {classes}});
    // d loss_i / d x_ij = (1 - ls) w_t (p_ij - [j == t]) + (ls / C) (p_ij sum_k w_k - w_j); 0 if ignored
    KernelBackward kernel = [log_probs = std::move(log_probs), targets, ignore_index, weight = std::move(weight), reduction,
                             scale, label_smoothing, dtype](const GradContext& c) -> Grads {
        const std::size_t rows = log_probs.shape()[0], cols = log_probs.shape()[1];
        // g_n, already scaled for mean: dLoss/dout read from the loss's own storage
        std::vector<double> upstream(rows);
        with_storage_type(dtype, [&](auto storage) {
            const auto* g_out = c.grad_values<typename decltype(storage)::type>().data();
            for (std::size_t i = 0; i < rows; ++i) upstream[i] = reduction == Reduction::none ? double(g_out[i]) : double(g_out[0]) * scale;
        });
        Array g = Array::from_shape({rows, cols});
        detail::by_tier(reference::cross_entropy_backward, fast::cross_entropy_backward, log_probs.data(), targets.data(),
                        weight.empty() ? nullptr : weight.data(), label_smoothing, ignore_index, upstream.data(), rows, cols,
                        g.data());
        return with_storage_type(dtype, [&](auto storage) { return grads_of(detail::stored_as<typename decltype(storage)::type>(std::move(g))); });
    };
    // create_graph: the double backward differentiates the composed twin (docs/derivatives.md)
    Backward in_graph = through_composed([targets, ignore_index, weight = cross_entropy_coefficients_weight(options, classes),
                                          reduction, scale, label_smoothing](const std::vector<Tensor>& in) {
        return cross_entropy_composed(in[0], targets, ignore_index, weight, label_smoothing, reduction, scale);
    });
    return with_storage_type(dtype, [&](auto storage) {
        return record("cross_entropy", detail::stored_as<typename decltype(storage)::type>(std::move(out)), {logits}, std::move(kernel),
                      std::move(saved), std::move(in_graph));
    });
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Indices& target_arg, const CrossEntropyFuncOptions& options) {
    const IndexArray targets = target_arg.get("cross_entropy");
    const Shape s = logits.shape();
    const Shape ts(targets.shape().begin(), targets.shape().end());
    // PyTorch's layouts: (N, C) with (N,); (N, C, d1, ..., dk) with (N, d1, ..., dk); (C,) with ().
    Shape expected;
    if (s.size() == 1) {
        expected = {};
    } else if (s.size() >= 2) {
        expected = s;
        expected.erase(expected.begin() + 1);
    }
    if (s.empty() || ts != expected) {
        fail("cross_entropy", fmt::format("expects logits (N, C) with targets (N,), (N, C, d1, ...) with targets (N, d1, "
                                          "...) or (C,) with a 0-D target; got logits {} and targets {}",
                                          shape_str(s), shape_str(ts)));
    }
    if (s.size() == 2) return cross_entropy_rows(logits, targets, options, s);
    const std::size_t classes = s.size() == 1 ? s[0] : s[1];
    if (s.size() == 1) {
        const Tensor loss = cross_entropy_rows(unsqueeze(logits, 0), IndexArray(xt::reshape_view(targets, {1})), options, s);
        return options.reduction() == Reduction::none ? squeeze(loss, 0) : loss;
    }
    // Classes last, then one row per position: (N, d1, ..., dk, C) -> (N * d1 * ... * dk, C).
    Axes order{0};
    for (std::size_t d = 2; d < s.size(); ++d) order.push_back(static_cast<int>(d));
    order.push_back(1);
    const Tensor rows = reshape(permute(logits, order), {-1, static_cast<long>(classes)});
    const IndexArray flat = xt::flatten(targets);
    const Tensor loss = cross_entropy_rows(rows, flat, options, s);
    if (options.reduction() != Reduction::none) return loss;
    return reshape(loss, std::vector<long>(ts.begin(), ts.end()));
}

Tensor cross_entropy(const Tensor& logits, const Indices& targets, Reduction reduction, double label_smoothing) {
    return cross_entropy(logits, targets,
                         CrossEntropyFuncOptions().reduction(reduction).label_smoothing(label_smoothing));
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
    const Shape s = input.shape();
    if (s != target.shape()) {
        fail("mse_loss", fmt::format("input {} and target {} must have the same shape", shape_str(s),
                                     shape_str(target.shape())));
    }
    const std::size_t n = input.numel();
    if (reduction == Reduction::mean && n == 0) fail("mse_loss", "mean over an empty input is undefined");
    const double scale = reduction == Reduction::mean ? 1.0 / static_cast<double>(n) : 1.0;
    // (x - t)^2 per element, or its sum times `scale`, in double on the inputs' own storage, each
    // result rounded once into it
    return on_storage(input, target, [&](const auto& xs, const auto& ts) {
        using T = typename std::decay_t<decltype(xs)>::value_type;
        const T *x = xs.data(), *t = ts.data();
        xt::xarray<T> out;
        if (reduction == Reduction::none) {
            out = xt::xarray<T>::from_shape(s);
            for (std::size_t i = 0; i < n; ++i) {
                const double d = static_cast<double>(x[i]) - static_cast<double>(t[i]);
                out.data()[i] = static_cast<T>(d * d);
            }
        } else {
            double total = 0.0;
#pragma omp simd reduction(+ : total)
            for (std::size_t i = 0; i < n; ++i) {
                const double d = static_cast<double>(x[i]) - static_cast<double>(t[i]);
                total += d * d;
            }
            out = xt::xarray<T>(static_cast<T>(total * scale));
        }
        // d/dx scale (x - t)^2 = 2 scale (x - t), d/dt = -2 scale (x - t), times g
        return record("mse_loss", std::move(out), {input, target}, [scale](const BackwardContext& c) -> std::vector<Tensor> {
            const Tensor dx = c.grad * (c.input(0) - c.input(1)) * (2.0 * scale);
            return {c.needs_grad(0) ? dx : Tensor(), c.needs_grad(1) ? neg(dx) : Tensor()};
        });
    });
}

}  // namespace xg::nn
