// Tutorial 05: the autograd graph of a composed LayerNorm vs the fused node, printed by walking
// Tensor::node()->parents and Node::saved; then gradcheck catching a deliberately broken backward.
// Guide: docs/tutorials/05-graph.md. Run with --step to pause after each step.
#include <cstdlib>
#include <fstream>
#include <utility>

#include <fmt/format.h>

#include "tutorials/common/graph_dump.hpp"
#include "tutorials/common/tutorial.hpp"

using namespace xg::tutorial;
namespace tv = tutorial_values;

int main(int argc, char** argv) {
    Tutorial tut(argc, argv, "05 The LayerNorm graph", "(supports A0.3: composed vs fused)");

    tut.section("05.1", "LayerNorm(4) on x (2, 3, 4) as composed primitive ops and as one fused node");
    const tv::GraphComparison g = tv::graph_comparison();
    tut.step(fmt::format("composed: {} op nodes (inputs first)", g.composed_nodes));
    tut.show(g.composed_text);
    tut.step(fmt::format("fused: {} op node", g.fused_nodes));
    tut.show(g.fused_text);
    tut.step(fmt::format("numbers the graph keeps until backward: composed {}, fused {}", g.composed_kept, g.fused_kept));
    tut.say("composed: every intermediate (x - mu, var + eps, sqrt, x_hat, gamma * x_hat) stays alive;");
    tut.say("fused: only the per-row mean and 1/sigma (6 rows x 2), x itself is an input anyway.");
    tut.step("max |composed - fused| output", sci(g.max_out_diff));
    tut.step("max |composed - fused| gradient of x", sci(g.max_grad_diff));
    for (const auto& [name, dot] : {std::pair{"05_composed_layernorm", &g.composed_dot}, {"05_fused_layernorm", &g.fused_dot}}) {
        const std::string path = tut.out_path(std::string(name) + ".dot");
        std::ofstream(path) << *dot;
        // Rendered where Graphviz is installed; the .dot text is the picture's source either way.
        if (std::system("command -v dot >/dev/null 2>&1") == 0) {
            std::system(("dot -Tsvg '" + path + "' -o '" + tut.out_path(std::string(name) + ".svg") + "'").c_str());
        }
    }
    tut.say("Graphviz versions (xg::to_dot): 05_composed_layernorm.dot, 05_fused_layernorm.dot in the output directory,");
    tut.say("rendered to .svg next to them where Graphviz's `dot` is installed");

    tut.section("05.2", "gradcheck on a LayerNorm whose backward forgets that mean and sigma depend on x");
    const tv::BrokenBackward b = tv::broken_backward_check();
    tut.step("broken: dx = rstd * gamma * dy");
    tut.say(b.broken_summary);
    tut.show(b.broken_report);
    tut.step("fused layer_norm, same inputs");
    tut.say(b.fused_summary);
    tut.conclude("the finite-difference Jacobian exposes the missing -mean(dx_hat) - x_hat * mean(dx_hat * x_hat) terms");
    return 0;
}
