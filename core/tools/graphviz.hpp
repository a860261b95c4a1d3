// Graph pictures: the graph that produced a tensor as Graphviz DOT text.
#pragma once

#include <map>
#include <string>

#include "core/engine/tensor.hpp"

namespace xg {

/// DOT text of the graph behind `t`: one box per node with its op, shape and the tensors it
/// saved for backward (name, shape, bytes); edges run from inputs to the ops that use them.
/// `names` labels nodes, e.g. the leaves {x.node().get(), "x"}: a named leaf shows its name where
/// an unnamed one shows "leaf", a named op "name = op". Render with `dot -Tsvg g.dot -o g.svg`.
std::string to_dot(const Tensor& t, const std::string& title = "xgrad graph",
                   const std::map<const Node*, std::string>& names = {});

/// Bytes a node keeps alive for backward: its own value, plus the extra saved tensors.
std::size_t saved_bytes(const Node& node);

}  // namespace xg
