#include "nn/losses.hpp"

#include <cmath>

#include <fmt/format.h>

namespace xg::nn {

Tensor cross_entropy(const Tensor& logits, const IndexArray& targets, Reduction reduction, double label_smoothing) {
    const Shape s = logits.shape();
    const Shape ts(targets.shape().begin(), targets.shape().end());
    if (s.size() != 2 || ts.size() != 1 || ts[0] != s[0]) {
        fail("cross_entropy", fmt::format("expects logits (N, C) and targets (N,), got logits {} and targets {}",
                                          shape_str(s), shape_str(ts)));
    }
    const std::size_t n = s[0], classes = s[1];
    if (classes == 0) fail("cross_entropy", fmt::format("logits {} have no classes", shape_str(s)));
    if (!(label_smoothing >= 0.0 && label_smoothing <= 1.0)) {
        fail("cross_entropy", fmt::format("label_smoothing must be in [0, 1], got {}", label_smoothing));
    }
    if (reduction == Reduction::mean && n == 0) fail("cross_entropy", "mean over an empty batch (N = 0) is undefined");
    for (std::size_t i = 0; i < n; ++i) {
        if (targets(i) < 0 || targets(i) >= static_cast<std::int64_t>(classes)) {
            fail("cross_entropy", fmt::format("target {} at position {} is out of range for C = {} classes (logits {})",
                                              targets(i), i, classes, shape_str(s)));
        }
    }

    // One pass per row for the max, one for sum(exp), one for sum(logit): loss needs only these.
    Array log_probs = Array::from_shape({n, classes});
    Array per_row = Array::from_shape({n});
    const double* x = logits.value().data();
    const double smooth = label_smoothing / static_cast<double>(classes);
    for (std::size_t i = 0; i < n; ++i) {
        const double* row = x + i * classes;
        double m = row[0];
        for (std::size_t j = 1; j < classes; ++j) m = std::max(m, row[j]);
        double sum_exp = 0.0;
#pragma omp simd reduction(+ : sum_exp)
        for (std::size_t j = 0; j < classes; ++j) sum_exp += std::exp(row[j] - m);
        // (x - m) - log(sum) rather than x - (m + log(sum)): at |x| ~ 1000 the rounded m + log(sum)
        // would cost ~1e-13 absolute in every log-probability (as in core log_softmax).
        const double log_sum = std::log(sum_exp);
        double sum_logp = 0.0;
        double* lp = log_probs.data() + i * classes;
#pragma omp simd reduction(+ : sum_logp)
        for (std::size_t j = 0; j < classes; ++j) {
            lp[j] = (row[j] - m) - log_sum;
            sum_logp += lp[j];
        }
        const auto t = static_cast<std::size_t>(targets(i));
        per_row(i) = -(1.0 - label_smoothing) * lp[t] - smooth * sum_logp;
    }

    Array out;
    double scale = 1.0;  // d out / d per_row (for mean and sum)
    if (reduction == Reduction::none) {
        out = std::move(per_row);
    } else {
        double total = 0.0;
        for (std::size_t i = 0; i < n; ++i) total += per_row(i);
        if (reduction == Reduction::mean) scale = 1.0 / static_cast<double>(n);
        out = Array(total * scale);
    }
    // d loss_i / d x_ij = softmax_ij - (1 - ls) [j == t_i] - ls / C
    return record("cross_entropy", std::move(out), {logits},
                  [log_probs = std::move(log_probs), targets, reduction, scale, label_smoothing, smooth](const GradContext& c) -> Grads {
                      const std::size_t rows = log_probs.shape()[0], cols = log_probs.shape()[1];
                      Array g = Array::from_shape({rows, cols});
                      for (std::size_t i = 0; i < rows; ++i) {
                          const double up = reduction == Reduction::none ? c.grad(i) : c.grad() * scale;
                          const double* lp = log_probs.data() + i * cols;
                          double* gi = g.data() + i * cols;
                          for (std::size_t j = 0; j < cols; ++j) gi[j] = up * (std::exp(lp[j]) - smooth);
                          gi[targets(i)] -= up * (1.0 - label_smoothing);
                      }
                      return {std::move(g)};
                  },
                  {{"log_probs", {n, classes}}});
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
    const Shape s = input.shape();
    if (s != target.shape()) {
        fail("mse_loss", fmt::format("input {} and target {} must have the same shape", shape_str(s),
                                     shape_str(target.shape())));
    }
    const std::size_t n = input.numel();
    if (reduction == Reduction::mean && n == 0) fail("mse_loss", "mean over an empty input is undefined");
    const double *x = input.value().data(), *t = target.value().data();
    Array out;
    double scale = 1.0;
    if (reduction == Reduction::none) {
        out = Array::from_shape(s);
        for (std::size_t i = 0; i < n; ++i) out.data()[i] = (x[i] - t[i]) * (x[i] - t[i]);
    } else {
        double total = 0.0;
#pragma omp simd reduction(+ : total)
        for (std::size_t i = 0; i < n; ++i) total += (x[i] - t[i]) * (x[i] - t[i]);
        if (reduction == Reduction::mean) scale = 1.0 / static_cast<double>(n);
        out = Array(total * scale);
    }
    // d/dx (x - t)^2 = 2 (x - t), d/dt = -2 (x - t)
    return record("mse_loss", std::move(out), {input, target}, [reduction, scale](const GradContext& c) -> Grads {
        const Array& xv = c.input(0);
        const Array& tv = c.input(1);
        Array dx = Array::from_shape(xv.shape());
        const double *px = xv.data(), *pt = tv.data(), *pg = c.grad.data();
        for (std::size_t i = 0, n = xv.size(); i < n; ++i) {
            const double up = reduction == Reduction::none ? pg[i] : pg[0] * scale;
            dx.data()[i] = 2.0 * up * (px[i] - pt[i]);
        }
        Grads g(2);
        if (c.needs_grad(1)) {
            Array dt = Array::from_shape(xv.shape());
            for (std::size_t i = 0; i < dx.size(); ++i) dt.data()[i] = -dx.data()[i];
            g[1] = std::move(dt);
        }
        if (c.needs_grad(0)) g[0] = std::move(dx);
        return g;
    });
}

}  // namespace xg::nn
