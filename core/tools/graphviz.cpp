#include "core/tools/graphviz.hpp"

#include <unordered_map>
#include <vector>

#include <fmt/format.h>

namespace xg {

namespace {

std::size_t numel(const Shape& s) {
    std::size_t n = 1;
    for (std::size_t d : s) n *= d;
    return n;
}

std::string human_bytes(std::size_t b) {
    if (b < 1024) return fmt::format("{} B", b);
    if (b < 1024 * 1024) return fmt::format("{:.1f} KiB", b / 1024.0);
    return fmt::format("{:.1f} MiB", b / (1024.0 * 1024.0));
}

}  // namespace

std::size_t saved_bytes(const Node& node) {
    std::size_t total = 0;
    for (const SavedInfo& s : node.saved) total += numel(s.shape) * sizeof(double);
    return total;
}

std::string to_dot(const Tensor& t, const std::string& title, const std::map<const Node*, std::string>& names) {
    std::string out = fmt::format("digraph xgrad {{\n  label=\"{}\";\n  rankdir=BT;\n  node [shape=box, fontname=\"monospace\"];\n", title);
    std::unordered_map<const Node*, std::size_t> id;
    std::vector<const Node*> stack{t.node().get()};
    id[t.node().get()] = 0;
    while (!stack.empty()) {  // iterative: graphs may be deep
        const Node* n = stack.back();
        stack.pop_back();
        const Shape shape(n->value.shape().begin(), n->value.shape().end());
        const auto named = names.find(n);
        const std::string what = named == names.end() ? n->op : n->is_leaf() ? named->second : named->second + " = " + n->op;
        std::string label = fmt::format("{}\\n{}", what, shape_str(shape));
        if (n->is_leaf()) {
            label += n->requires_grad ? "\\nrequires_grad" : "\\nconstant";
        }
        for (const SavedInfo& s : n->saved) {
            label += fmt::format("\\nsaved {} {} ({})", s.name, shape_str(s.shape), human_bytes(numel(s.shape) * sizeof(double)));
        }
        const char* style = n->is_leaf() ? (n->requires_grad ? ", style=filled, fillcolor=lightblue" : ", style=dashed")
                                         : ", style=filled, fillcolor=lightyellow";
        out += fmt::format("  n{} [label=\"{}\"{}];\n", id[n], label, style);
        for (const NodePtr& p : n->parents) {
            auto [it, inserted] = id.try_emplace(p.get(), id.size());
            if (inserted) stack.push_back(p.get());
            out += fmt::format("  n{} -> n{};\n", it->second, id[n]);
        }
    }
    return out + "}\n";
}

}  // namespace xg
