// Graph pictures: the graph that produced a tensor as Graphviz DOT text.
#pragma once

#include <string>

#include "core/tensor.hpp"

namespace xg {

/// DOT text of the graph behind `t`: one box per node with its op, shape and the tensors it
/// saved for backward (name, shape, bytes); edges run from inputs to the ops that use them.
/// Render with `dot -Tsvg graph.dot -o graph.svg`.
std::string to_dot(const Tensor& t, const std::string& title = "xgrad graph");

/// Bytes a node keeps alive for backward: its own value, plus the extra saved tensors.
std::size_t saved_bytes(const Node& node);

}  // namespace xg
