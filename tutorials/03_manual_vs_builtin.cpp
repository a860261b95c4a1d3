// Tutorial 03: a LayerNorm from primitive ops vs the library's fused one (A0.3), and the paper
// walkthrough's NumPy-style class with a hand-written backward (A1.4).
// Guide: docs/tutorials/03-manual-vs-builtin.md. Run with --step to pause after each step.
#include <fmt/format.h>

#include "tutorials/common/manual_vs_builtin.hpp"
#include "tutorials/common/tutorial.hpp"

using namespace xg::tutorial;
namespace tv = tutorial_values;

int main(int argc, char** argv) {
    Tutorial tut(argc, argv, "03 Manual vs built-in LayerNorm", "A0.3, A1.4");

    tut.section("A0.3", "ManualLayerNorm (mean, var, sqrt, affine) vs nn::LayerNorm(8), x = randn(2, 4, 8), seed 42");
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
    tut.step("finite differences along 3 random directions, worst relative error: x", sci(c.fd_directional_rel_err_x));
    tut.step("  ... gamma", sci(c.fd_directional_rel_err_gamma));
    tut.step("  ... beta", sci(c.fd_directional_rel_err_beta));
    tut.step("update(0.001): max |change| of gamma", num(c.max_update_gamma, 6));
    tut.step("update(0.001): max |change| of beta", num(c.max_update_beta, 6));
    tut.step("max |update(lr) - optim::SGD(lr) step|", sci(c.update_vs_sgd));
    tut.step("gradcheck of the library op", c.gradcheck_summary);
    tut.conclude("analytic backward == autograd == finite differences; update(lr) is plain SGD");
    return 0;
}
