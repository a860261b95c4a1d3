#include "tutorials/common/layernorm_by_hand.hpp"

#include <cmath>
#include <memory>

#include "core/ops.hpp"
#include "nn/functional.hpp"
#include "nn/norm_layers.hpp"
#include "tutorials/common/tutorial.hpp"

namespace tutorial_values {

using namespace xg;
namespace F = xg::nn::functional;

FormulaSteps a0_1_formula() {
    FormulaSteps s;
    Tensor x({{2.0, 4.0, 6.0, 8.0}});
    const std::size_t H = x.size(1);
    Tensor gamma = ones({H}), beta = zeros({H});
    Tensor mu = mean(x, {-1}, true);                         // Step 1
    Tensor var2 = var(x, {-1}, /*unbiased=*/false, true);    // Step 2: divide by H
    Tensor x_hat = (x - mu) / sqrt(var2 + s.eps);            // Step 3: eps inside the root
    Tensor y = gamma * x_hat + beta;                         // Step 4
    s.x = x.value();
    s.mean = mu.value();
    s.variance = var2.value();
    s.x_hat = x_hat.value();
    s.y = y.value();
    s.gamma = gamma.value();
    s.beta = beta.value();
    s.gamma_shape = gamma.shape();
    s.beta_shape = beta.shape();
    return s;
}

HandCalculation a2_1_hand_calculation() {
    HandCalculation h;
    h.x = Array{2.0, 4.0, 6.0, 8.0};
    double sum = 0;
    for (double v : h.x) sum += v;
    h.mean = sum / 4.0;
    double squares = 0;
    for (double v : h.x) squares += (v - h.mean) * (v - h.mean);
    h.variance = squares / 4.0;
    h.sigma = std::sqrt(h.variance);  // the article ignores eps here
    h.centered = h.x - h.mean;
    h.normalized = h.centered / h.sigma;
    h.sum_of_outputs = 0;
    for (double v : h.normalized) h.sum_of_outputs += v;
    return h;
}

Builtin a2_2_builtin() {
    Builtin b;
    auto ln = std::make_shared<nn::LayerNorm>(4);
    Tensor y = ln->forward(Tensor({{2.0, 4.0, 6.0, 8.0}}));
    b.out = y.value();
    b.weight = ln->weight.value();
    b.bias = ln->bias.value();
    b.weight_shape = ln->weight.shape();
    b.bias_shape = ln->bias.shape();
    b.max_diff_vs_formula = xg::tutorial::max_abs_diff(b.out, a0_1_formula().y);
    Array hand = a2_1_hand_calculation().normalized;
    hand.reshape({1, 4});
    b.max_diff_vs_hand = xg::tutorial::max_abs_diff(b.out, hand);
    return b;
}

Array round_to(const Array& a, int decimals) {
    const double scale = std::pow(10.0, decimals);
    Array r = a;
    for (double& v : r) v = std::round(v * scale) / scale;
    return r;
}

Array truncate_to(const Array& a, int decimals) {
    const double scale = std::pow(10.0, decimals);
    Array r = a;
    for (double& v : r) v = std::trunc(v * scale) / scale;
    return r;
}

SingleVector a3_1_single_vector() {
    SingleVector s;
    Tensor x{1.0, 2.0, 3.0, 4.0};
    // The LeetCode version takes statistics over the whole vector: normalized_shape = (4,).
    s.x = x.value();
    s.mean = mean(x).item();
    s.variance = var(x, {0}, false).item();
    s.sigma = std::sqrt(s.variance + 1e-5);
    s.plain = F::layer_norm(x, {4}, ones({4}), zeros({4}), 1e-5).value();
    s.affine = F::layer_norm(x, {4}, full({4}, 2.0), full({4}, 1.0), 1e-5).value();
    s.affine_round4 = round_to(s.affine, 4);
    s.affine_trunc4 = truncate_to(s.affine, 4);
    return s;
}

namespace {

// The article's "wrong" version: no eps at all.
Tensor layer_norm_without_eps(const Tensor& x, const Tensor& gamma, const Tensor& beta) {
    Tensor mu = mean(x, {-1}, true);
    Tensor v = var(x, {-1}, false, true);
    return gamma * ((x - mu) / sqrt(v)) + beta;
}

}  // namespace

EpsPitfall a3_2_eps_pitfall() {
    EpsPitfall p;
    const Tensor gamma = ones({4});
    const Tensor beta{0.5, -0.5, 0.25, 0.0};
    const Tensor w{1.0, 2.0, 3.0, 4.0};  // upstream gradient: loss = sum(y * w)
    p.beta = beta.value();
    p.upstream = w.value();
    {
        Tensor x(full({4}, 3.0).value(), true);
        Tensor y = layer_norm_without_eps(x, gamma, beta);
        sum(y * w).backward();
        p.x = x.value();
        p.out_without_eps = y.value();
        p.grad_without_eps = x.grad_value();
    }
    try {
        AnomalyModeGuard anomaly;
        Tensor x(full({4}, 3.0).value(), true);
        Tensor y = layer_norm_without_eps(x, gamma, beta);
        sum(y * w).backward();
        p.anomaly_message = "(no error)";
    } catch (const Error& e) {
        p.anomaly_message = e.what();
    }
    {
        Tensor x(full({4}, 3.0).value(), true);
        Tensor y = nn::functional::layer_norm(x, {4}, gamma, beta, 1e-5);
        sum(y * w).backward();
        p.out_with_eps = y.value();
        p.grad_with_eps = x.grad_value();
    }
    Tensor near(full({3}, 0.1).value());
    p.near_constant = near.value();
    p.near_constant_without_eps = layer_norm_without_eps(near, ones({3}), zeros({3})).value();
    p.near_constant_with_eps = nn::functional::layer_norm(near, {3}, ones({3}), zeros({3}), 1e-5).value();
    return p;
}

}  // namespace tutorial_values
