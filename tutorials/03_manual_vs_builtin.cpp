// Tutorial 03: a LayerNorm from primitive ops vs the library's fused one (A0.3), and the paper
// walkthrough's NumPy-style class with a hand-written backward (A1.4).
// Guide: docs/tutorials/03-manual-vs-builtin.md. Run with --step to pause after each step.
#include <fmt/format.h>

#include "tutorials/common/manual_vs_builtin.hpp"
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
