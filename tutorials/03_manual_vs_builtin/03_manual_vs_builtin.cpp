// Tutorial 03: a LayerNorm from primitive ops vs the library's fused one (A0.3), and the paper
// walkthrough's NumPy-style class with a hand-written backward (A1.4).
// Guide: docs/tutorials/03-manual-vs-builtin.md. Run with --step to pause after each step.
#include "tutorials/03_manual_vs_builtin/manual_vs_builtin.hpp"

#include <algorithm>
#include <cmath>
#include <memory>

#include <fmt/format.h>
#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

#include "core/tools/gradcheck.hpp"
#include "core/ops/ops.hpp"
#include "core/engine/random.hpp"
#include "nn/functional/functional.hpp"
#include "nn/modules/norm_layers.hpp"
#include "optim/sgd.hpp"
#include "tutorials/common/graph_dump.hpp"
#include "tutorials/common/tutorial.hpp"

using namespace xg::tutorial;
namespace tv = tutorial_values;

int main(int argc, char** argv) {
    Tutorial tut(argc, argv,
                 {"03 Manual vs built-in LayerNorm", "A0.3, A1.4", "docs/tutorials/03-manual-vs-builtin.md", "about 1 s", "", ""});

    tut.section("A0.3", "ManualLayerNorm (mean, var, sqrt, affine) vs nn::LayerNorm(8)");
    tut.say("x = randn(2, 4, 8) from seed 42");
    const tv::ManualVsBuiltin m = tv::a0_3_manual_vs_builtin();
    tut.step("input shape", shape(m.x_shape));
    tut.step("output shape", shape(m.out_shape));
    tut.step(fmt::format("gamma shape {}, beta shape {} (copied from the built-in, randomised)", shape(m.gamma_shape),
                         shape(m.beta_shape)));
    tut.step("max |manual - built-in| (forward)", sci(m.max_out_diff));
    tut.step(fmt::format("graph nodes: manual {}, built-in {}", m.manual_nodes, m.builtin_nodes));
    tut.step("max gradient difference for x", sci(m.max_grad_x_diff));
    tut.step("max gradient difference for gamma", sci(m.max_grad_gamma_diff));
    tut.step("max gradient difference for beta", sci(m.max_grad_beta_diff));
    tut.say("(our generator is not torch's: seed 42 gives different numbers than the blog's torch.randn)");
    tut.conclude("same values and gradients to rounding (~1e-16 in double precision)");

    tut.section("A1.4", "the NumPy-style class: forward, backward(grad_output), update(lr); eps 1e-8");
    // Where the articles disagree (claims.md): said here, where the eps is chosen.
    tut.article_note("eps = 1e-8 (article 001's NumPy class)", "1e-8 here, to match; 1e-5 everywhere else",
                     "articles 000, 002, 003, 004 and PyTorch use 1e-5; the articles disagree");
    const tv::NumpyStyleCheck c = tv::a1_4_numpy_style();
    tut.step(fmt::format("x {}, y {}, grad_input {}, grad_gamma {}", shape(c.x_shape), shape(c.y_shape),
                         shape(c.grad_input_shape), shape(c.grad_gamma_shape)));
    tut.step("max |forward - library layer_norm(eps=1e-8)|", sci(c.max_diff_forward));
    tut.step("max |grad_input - autograd|", sci(c.max_diff_grad_input));
    tut.step("max |grad_gamma - autograd|", sci(c.max_diff_grad_gamma));
    tut.step("max |grad_beta - autograd|", sci(c.max_diff_grad_beta));
    tut.step("the article's backward: three terms, through grad_var and grad_mean");
    tut.say("dx = g / sqrt(var + eps) + grad_var * 2 (x - mean) / N + grad_mean / N,  g = grad_output * gamma");
    tut.say("row 0 starts " + vec(c.dx_three_term_row0, 7));
    tut.step("the compact form");
    tut.say("dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat)),  rstd = 1 / sqrt(var + eps)");
    tut.say("row 0 starts " + vec(c.dx_compact_row0, 7));
    tut.say("max |compact - three terms| over all (32, 768) entries = " + sci(c.max_diff_compact_vs_three_term));
    tut.say("(docs/derivations/layernorm.md derives the compact form; guide 03 shows the algebra)");
    tut.step("central differences along 3 random directions, worst relative error");
    tut.say(fmt::format("x {}, gamma {}, beta {}", under(c.fd_directional_rel_err_x, 1e-7),
                        under(c.fd_directional_rel_err_gamma, 1e-7), under(c.fd_directional_rel_err_beta, 1e-8)));
    tut.step("update(0.001): max |change| of gamma", num(c.max_update_gamma, 6));
    tut.step("update(0.001): max |change| of beta", num(c.max_update_beta, 6));
    tut.step("max |update(lr) - optim::SGD(lr) step|", sci(c.update_vs_sgd));
    tut.step("xg::gradcheck of the library op, random-projection mode (v^T J u for random u, v)");
    tut.say(gradcheck_line(c.gradcheck, 1e-5, 1e-7));
    tut.conclude("analytic backward == autograd == finite differences; update(lr) is plain SGD");
    return 0;
}

namespace tutorial_values {

using namespace xg;
using xg::tutorial::max_abs_diff;

ManualLayerNorm::ManualLayerNorm(std::size_t normalized_shape, double eps_) : eps(eps_) {
    register_parameter("gamma", gamma, ones({normalized_shape}));
    register_parameter("beta", beta, zeros({normalized_shape}));
}

Tensor ManualLayerNorm::forward(const Tensor& x) {
    Tensor mu = mean(x, {-1}, true);
    Tensor v = var(x, {-1}, /*unbiased=*/false, true);
    Tensor x_norm = (x - mu) / sqrt(v + eps);
    return gamma * x_norm + beta;
}

ManualVsBuiltin a0_3_manual_vs_builtin() {
    ManualVsBuiltin r;
    manual_seed(42);
    const Array x0 = randn({2, 4, 8}).value();
    const Array g = randn({2, 4, 8}).value();  // upstream gradient for the backward comparison
    auto manual_ln = std::make_shared<ManualLayerNorm>(8);
    auto builtin_ln = std::make_shared<nn::LayerNorm>(8);
    // Same parameters (as the blog's copy_), made non-trivial so the affine step matters.
    builtin_ln->weight.mutable_value() = randn({8}).value();
    builtin_ln->bias.mutable_value() = randn({8}).value();
    manual_ln->gamma.mutable_value() = builtin_ln->weight.value();
    manual_ln->beta.mutable_value() = builtin_ln->bias.value();

    Tensor xm(x0, true), xb(x0, true);
    Tensor out_manual = manual_ln->forward(xm);
    Tensor out_builtin = builtin_ln->forward(xb);
    r.x_shape = xm.shape();
    r.out_shape = out_builtin.shape();
    r.gamma_shape = builtin_ln->weight.shape();
    r.beta_shape = builtin_ln->bias.shape();
    r.max_out_diff = max_abs_diff(out_manual.value(), out_builtin.value());
    r.manual_nodes = count_op_nodes(out_manual);
    r.builtin_nodes = count_op_nodes(out_builtin);

    sum(out_manual * Tensor(g)).backward();
    sum(out_builtin * Tensor(g)).backward();
    r.max_grad_x_diff = max_abs_diff(xm.grad_value(), xb.grad_value());
    r.max_grad_gamma_diff = max_abs_diff(manual_ln->gamma.grad_value(), builtin_ln->weight.grad_value());
    r.max_grad_beta_diff = max_abs_diff(manual_ln->beta.grad_value(), builtin_ln->bias.grad_value());
    return r;
}

// ---- A1.4: the NumPy-style class -----------------------------------------------------------------

NumpyStyleLayerNorm::NumpyStyleLayerNorm(std::size_t n, double eps)
    : normalized_shape(n), epsilon(eps), gamma(xt::ones<double>({n})), beta(xt::zeros<double>({n})) {}

Array NumpyStyleLayerNorm::forward(const Array& x) {
    // Line for line the article's code (keepdims reductions evaluated before broadcasting).
    x_ = x;
    mean_ = xt::eval(xt::mean(x, {x.dimension() - 1}, xt::keep_dims));
    const Array centered = x - mean_;
    var_ = xt::eval(xt::mean(centered * centered, {x.dimension() - 1}, xt::keep_dims));  // np.var: biased
    x_hat_ = (x - mean_) / xt::sqrt(var_ + epsilon);
    return gamma * x_hat_ + beta;
}

Array NumpyStyleLayerNorm::backward(const Array& grad_output) {
    const double N = static_cast<double>(normalized_shape);
    const std::size_t last = grad_output.dimension() - 1;
    std::vector<std::size_t> leading(last);
    for (std::size_t i = 0; i < last; ++i) leading[i] = i;
    grad_gamma = xt::sum(grad_output * x_hat_, leading);
    grad_beta = xt::sum(grad_output, leading);
    const Array grad_x_hat = grad_output * gamma;
    const Array centered = x_ - mean_;
    const Array inv_std = 1.0 / xt::sqrt(var_ + epsilon);
    const Array grad_var =
        xt::eval(xt::sum(grad_x_hat * centered * (-0.5) * xt::pow(var_ + epsilon, -1.5), {last}, xt::keep_dims));
    const Array grad_mean = xt::eval(xt::sum(grad_x_hat * (-1.0) * inv_std, {last}, xt::keep_dims)) +
                            grad_var * xt::eval(xt::sum(-2.0 * centered, {last}, xt::keep_dims)) / N;
    return grad_x_hat * inv_std + grad_var * 2.0 * centered / N + grad_mean / N;
}

Array NumpyStyleLayerNorm::backward_compact(const Array& grad_output) const {
    const std::size_t last = grad_output.dimension() - 1;
    const Array g = grad_output * gamma;  // dL/dx_hat
    const Array rstd = 1.0 / xt::sqrt(var_ + epsilon);
    const Array mean_g = xt::eval(xt::mean(g, {last}, xt::keep_dims));
    const Array mean_g_xhat = xt::eval(xt::mean(g * x_hat_, {last}, xt::keep_dims));
    return rstd * (g - mean_g - x_hat_ * mean_g_xhat);
}

void NumpyStyleLayerNorm::update(double learning_rate) {
    gamma -= learning_rate * grad_gamma;
    beta -= learning_rate * grad_beta;
}

namespace {

// sum(forward(x) * grad_output): the scalar whose gradient backward() computes.
double objective(NumpyStyleLayerNorm ln, const Array& x, const Array& grad_output) {
    return xt::sum(ln.forward(x) * grad_output)();
}

// Largest relative gap between <analytic, v> and the central difference of the objective along v.
template <class Perturb>
double directional_fd(const Array& analytic, Generator& gen, Perturb objective_at) {
    double worst = 0;
    const double h = 1e-6;
    for (int k = 0; k < 3; ++k) {
        const Array v = randn(Shape(analytic.shape().begin(), analytic.shape().end()), gen).value();
        const double predicted = xt::sum(analytic * v)();
        const double numerical = (objective_at(v, h) - objective_at(v, -h)) / (2 * h);
        worst = std::max(worst, std::fabs(predicted - numerical) / std::max(std::fabs(numerical), 1e-12));
    }
    return worst;
}

}  // namespace

NumpyStyleCheck a1_4_numpy_style() {
    NumpyStyleCheck c;
    Generator gen(2016);
    const Array x = randn({32, 768}, gen).value();
    const Array grad_output = randn({32, 768}, gen).value();

    NumpyStyleLayerNorm ln(768);  // epsilon 1e-8 as in the article
    const NumpyStyleLayerNorm before = ln;
    const Array y = ln.forward(x);
    const Array grad_input = ln.backward(grad_output);
    const Array grad_input_compact = ln.backward_compact(grad_output);
    c.dx_three_term_row0 = xt::view(grad_input, 0, xt::range(0, 4));
    c.dx_compact_row0 = xt::view(grad_input_compact, 0, xt::range(0, 4));
    c.max_diff_compact_vs_three_term = max_abs_diff(grad_input_compact, grad_input);
    c.x_shape = Shape(x.shape().begin(), x.shape().end());
    c.y_shape = Shape(y.shape().begin(), y.shape().end());
    c.grad_input_shape = Shape(grad_input.shape().begin(), grad_input.shape().end());
    c.grad_gamma_shape = Shape(ln.grad_gamma.shape().begin(), ln.grad_gamma.shape().end());

    // Autograd through the library's fused layer_norm with the same eps.
    Tensor tx(x, true), tg(before.gamma, true), tb(before.beta, true);
    Tensor ty = nn::functional::layer_norm(tx, {768}, tg, tb, 1e-8);
    sum(ty * Tensor(grad_output)).backward();
    c.max_diff_forward = max_abs_diff(y, ty.value());
    c.max_diff_grad_input = max_abs_diff(grad_input, tx.grad_value());
    c.max_diff_grad_gamma = max_abs_diff(ln.grad_gamma, tg.grad_value());
    c.max_diff_grad_beta = max_abs_diff(ln.grad_beta, tb.grad_value());

    // Finite differences of the objective along random directions, for x, gamma and beta.
    c.fd_directional_rel_err_x = directional_fd(grad_input, gen, [&](const Array& v, double h) {
        return objective(before, x + h * v, grad_output);
    });
    c.fd_directional_rel_err_gamma = directional_fd(ln.grad_gamma, gen, [&](const Array& v, double h) {
        NumpyStyleLayerNorm p = before;
        p.gamma = p.gamma + h * v;
        return objective(p, x, grad_output);
    });
    c.fd_directional_rel_err_beta = directional_fd(ln.grad_beta, gen, [&](const Array& v, double h) {
        NumpyStyleLayerNorm p = before;
        p.beta = p.beta + h * v;
        return objective(p, x, grad_output);
    });

    // update(lr) is one plain SGD step.
    ln.update(0.001);
    c.max_update_gamma = max_abs_diff(ln.gamma, before.gamma);
    c.max_update_beta = max_abs_diff(ln.beta, before.beta);
    optim::SGD sgd({tg, tb}, optim::SGDOptions(0.001));
    sgd.step();
    c.update_vs_sgd = std::max(max_abs_diff(ln.gamma, tg.value()), max_abs_diff(ln.beta, tb.value()));

    // And the library op itself against finite differences (random projections: 32 x 768 is big).
    GradcheckOptions opt;
    opt.name = "layer_norm (32, 768) eps 1e-8";
    opt.random_projection = true;
    c.gradcheck = gradcheck(
        [](const std::vector<Tensor>& in) { return nn::functional::layer_norm(in[0], {768}, in[1], in[2], 1e-8); },
        {Tensor(x, true), Tensor(before.gamma, true), Tensor(before.beta, true)}, opt);
    return c;
}

}  // namespace tutorial_values
