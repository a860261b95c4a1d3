// The graph dump of tutorial 05 (also used by tutorial 03): the composed LayerNorm graph vs the
// fused node, printed as text by walking Tensor::node()->parents and Node::saved; and gradcheck
// catching a broken backward.
#pragma once

#include <map>
#include <string>

#include "core/tools/gradcheck.hpp"
#include "core/engine/tensor.hpp"

namespace tutorial_values {

using xg::Tensor;

/// Distinct non-leaf nodes reachable from `t` (the ops between the inputs and `t`).
std::size_t count_op_nodes(const Tensor& t);

/// One line per node, inputs first: "%3 = var(%0) -> (2, 3, 1)  saved: mean (2, 3, 1)".
/// Leaves are named from `names` (node -> "x", "gamma", ...), others get %k ids.
std::string graph_text(const Tensor& t, const std::map<const xg::Node*, std::string>& names);

/// Numbers (doubles) the graph keeps alive until backward: every intermediate node's value plus
/// its saved extras (the output and the leaves are not counted).
std::size_t graph_kept_numbers(const Tensor& t);

/// The composed and fused graphs of LayerNorm(4) on x (2, 3, 4).
struct GraphComparison {
    std::string composed_text, fused_text;
    std::size_t composed_nodes = 0, fused_nodes = 0;
    std::size_t composed_kept = 0, fused_kept = 0;
    double max_out_diff = 0, max_grad_diff = 0;
    std::string composed_dot, fused_dot;  ///< Graphviz text from xg::to_dot, leaves named x, gamma, beta
};
GraphComparison graph_comparison();

/// gradcheck on a LayerNorm whose backward forgets that mean and variance depend on x
/// (dx = rstd * gamma * dy), and on the correct fused op, same inputs.
struct BrokenBackward {
    xg::GradcheckResult broken, fused;
};
BrokenBackward broken_backward_check();

}  // namespace tutorial_values
