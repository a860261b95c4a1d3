// Tutorial 05: the autograd graph of a composed LayerNorm vs the fused node, printed by walking
// Tensor::node()->parents and Node::saved; then gradcheck catching a deliberately broken backward.
// Guide: docs/tutorials/05-graph.md. Run with --step to pause after each step.
#include <cstdlib>
#include <fstream>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "tutorials/common/graph_dump.hpp"
#include "tutorials/common/tutorial.hpp"

using namespace xg::tutorial;
namespace tv = tutorial_values;

int main(int argc, char** argv) {
    Tutorial tut(argc, argv,
                 {"05 The LayerNorm graph", "(supports A0.3: composed vs fused)", "docs/tutorials/05-graph.md", "under 1 s", "",
                  "05_composed_layernorm.dot, 05_fused_layernorm.dot (and .svg with Graphviz)"});

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
    std::vector<std::string> rendered;
    for (const auto& [name, dot] : {std::pair{"05_composed_layernorm", &g.composed_dot}, {"05_fused_layernorm", &g.fused_dot}}) {
        const std::string path = tut.out_path(std::string(name) + ".dot");
        std::ofstream(path) << *dot;
        // Rendered where Graphviz is installed; the .dot text is the picture's source either way.
        const std::string svg = tut.out_path(std::string(name) + ".svg");
        if (std::system("command -v dot >/dev/null 2>&1") == 0 &&
            std::system(("dot -Tsvg '" + path + "' -o '" + svg + "'").c_str()) == 0) {
            rendered.push_back(svg);
        }
    }
    tut.say("the same graphs for Graphviz (xg::to_dot, leaves named x, gamma, beta) in the output");
    tut.say("directory: 05_composed_layernorm.dot, 05_fused_layernorm.dot, and .svg pictures of them");
    tut.say("where Graphviz's `dot` is installed (bash scripts/setup.sh run installs it)");
    for (const std::string& svg : rendered) tut.say("plot: " + svg);

    tut.section("05.2", "gradcheck on a LayerNorm whose backward forgets that mean and sigma depend on x");
    const tv::BrokenBackward b = tv::broken_backward_check();
    tut.step("broken: dx = rstd * gamma * dy");
    const xg::GradcheckResult& r = b.broken;
    tut.say(fmt::format("gradcheck {} {}: {} entries, max abs err {}, max rel err {}", r.name, r.ok ? "ok" : "FAILED",
                        r.checked_elements, sci(r.max_abs_error, 2), sci(r.max_rel_error, 2)));
    tut.say(fmt::format("worst entry: d output {} / d input #{} {}: analytic {}, numerical {}",
                        vec(std::vector<double>(r.worst_output_index.begin(), r.worst_output_index.end()), 0), r.worst_input,
                        vec(std::vector<double>(r.worst_input_index.begin(), r.worst_input_index.end()), 0),
                        sci(r.worst_analytic, 4), sci(r.worst_numerical, 4)));
    tut.say(fmt::format("{} times the tolerance atol + rtol * |numerical|", sci(r.worst_ratio, 1)));
    tut.step("fused layer_norm, same inputs");
    tut.say(gradcheck_line(b.fused, 1e-8, 1e-6));
    tut.conclude("the finite-difference Jacobian exposes the missing terms");
    tut.say("   -mean(dx_hat) - x_hat * mean(dx_hat * x_hat) of dx = rstd * (dx_hat - ...)");
    return 0;
}

