#include "core/engine/tensor.hpp"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "core/fast/memory.hpp"
#include "core/ops/ops.hpp"

namespace xg {

namespace {
thread_local bool g_grad_mode = true;
// True while a first-order backward runs an op's Backward: the ops it calls are the backward's
// arithmetic, so anomaly mode checks their results as "backward of '<op>'", not as forwards.
thread_local bool g_in_backward = false;
bool g_anomaly_mode = false;
std::atomic<std::size_t> g_live_nodes{0};
// Ticks once per in-place change of any value (Node::version, Node::recorded_at).
std::atomic<std::uint64_t> g_clock{0};
std::atomic<std::uint64_t> g_hook_ids{0};

NodePtr new_node() {
    ++g_live_nodes;
    return std::shared_ptr<Node>(new Node(), [](Node* n) {
        --g_live_nodes;
        delete n;
    });
}

// Rounds a float32 node's value and gradient to float32 once a writer may have left them off
// the grid (Node::unrounded).
void settle(Node& n) {
    if (!n.unrounded) return;
    n.unrounded = false;
    round_to_float32(n.value.data(), n.value.size());
    if (n.grad) round_to_float32(n.grad->data(), n.grad->size());
}

// `a` stored as `dtype`: rounded when float32.
Array stored_as(Dtype dtype, Array a) {
    if (dtype == Dtype::Float32) round_to_float32(a.data(), a.size());
    return a;
}

void check_finite(const Array& a, const std::string& what) {
    const double* p = a.data();
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (!std::isfinite(p[i])) {
            fail(what, fmt::format("anomaly mode: produced {} at flat index {} of a tensor of shape {}",
                                   p[i], i, shape_str(Shape(a.shape().begin(), a.shape().end()))));
        }
    }
}
}  // namespace

std::string shape_str(const Shape& shape) {
    std::string s = "(";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        s += fmt::format(i ? ", {}" : "{}", shape[i]);
    }
    if (shape.size() == 1) s += ",";
    return s + ")";
}

void fail(const std::string& op, const std::string& message) { throw Error(op + ": " + message); }

namespace {

// "a leaf of shape (3,)" / "the output of 'exp', shape (2, 2)": how an error names a tensor.
std::string describe(const Node& n) {
    const Shape s(n.value.shape().begin(), n.value.shape().end());
    return n.is_leaf() ? "a leaf of shape " + shape_str(s) : fmt::format("the output of '{}', shape {}", n.op, shape_str(s));
}

[[noreturn]] void modified_in_place(const Node& node, const std::string& which) {
    fail("backward of '" + node.op + "'",
         fmt::format("one of the variables needed for gradient computation has been modified by an inplace operation: "
                     "{} was changed in place after the forward of '{}' used it (by mutable_value(), data(), an "
                     "optimizer step, an initialiser or load_state_dict); run backward before changing it, or run "
                     "the forward again",
                     which, node.op));
}

}  // namespace

const Array& GradContext::output() const {
    if (node_.version > node_.recorded_at) {
        const Shape s(node_.value.shape().begin(), node_.value.shape().end());
        modified_in_place(node_, fmt::format("the output of '{}' (shape {})", node_.op, shape_str(s)));
    }
    return node_.value;
}

const Array& GradContext::input(std::size_t i) const {
    const Node& p = *node_.parents[i];
    if (p.version > node_.recorded_at) modified_in_place(node_, fmt::format("input {} of '{}' ({})", i, node_.op, describe(p)));
    return p.value;
}

Shape GradContext::input_shape(std::size_t i) const {
    const auto& s = node_.parents[i]->value.shape();
    return Shape(s.begin(), s.end());
}

std::size_t GradContext::num_inputs() const { return node_.parents.size(); }
bool GradContext::needs_grad(std::size_t i) const { return node_.parents[i]->requires_grad; }
Array& GradContext::accumulated(std::size_t i) const {
    Node* p = node_.parents[i].get();
    if (pending_ == nullptr || !p->requires_grad) {
        fail("backward", fmt::format("accumulated({}): input {} needs no gradient, or the context is not backward()'s", i, i));
    }
    auto [slot, inserted] = pending_->try_emplace(p);
    if (inserted) slot->second = xt::zeros<double>(p->value.shape());
    return slot->second;
}

// Destroying the head of a long chain would recurse once per node through shared_ptr
// destructors; instead we move parents onto an explicit stack and let each die childless.
Node::~Node() {
    std::vector<NodePtr> stack = std::move(parents);
    while (!stack.empty()) {
        NodePtr n = std::move(stack.back());
        stack.pop_back();
        if (n && n.use_count() == 1) {
            for (auto& p : n->parents) stack.push_back(std::move(p));
            n->parents.clear();
        }
    }
}

// ---- Tensor -------------------------------------------------------------------------------

Tensor::Tensor(Array value, bool requires_grad) : Tensor(std::move(value), default_dtype(), requires_grad) {}
Tensor::Tensor(Array value, Dtype dtype, bool requires_grad) : node_(new_node()) {
    node_->value = stored_as(dtype, std::move(value));
    node_->dtype = dtype;
    node_->requires_grad = requires_grad;
}
Tensor::Tensor(std::initializer_list<ListElement> v) : Tensor(Array::from_shape({v.size()})) {
    std::size_t i = 0;
    for (const ListElement& e : v) node_->value.data()[i++] = e.value;
    node_->value = stored_as(node_->dtype, std::move(node_->value));
}
Tensor::Tensor(xt::nested_initializer_list_t<double, 2> v) : Tensor(Array(v)) {}
Tensor::Tensor(xt::nested_initializer_list_t<double, 3> v) : Tensor(Array(v)) {}
Tensor::Tensor(xt::nested_initializer_list_t<double, 4> v) : Tensor(Array(v)) {}

static const Node& checked(const NodePtr& n) {
    if (!n) throw Error("Tensor: use of an undefined tensor (default-constructed)");
    return *n;
}

const Array& Tensor::value() const {
    checked(node_);
    settle(*node_);
    return node_->value;
}
Array& Tensor::mutable_value() {
    checked(node_);
    node_->version = g_clock.fetch_add(1, std::memory_order_relaxed) + 1;
    settle(*node_);  // the writer reads what it updates (x = 0.9 x + ...): the last writes, rounded
    node_->unrounded = node_->dtype == Dtype::Float32;
    return node_->value;
}
Dtype Tensor::dtype() const { return checked(node_).dtype; }
// Shapes are read without settling a float32 node's pending rounding: a writer may ask for the
// size between taking the storage and writing it (double* p = t.data(); for (i < t.numel()) ...).
Shape Tensor::shape() const {
    const auto& s = checked(node_).value.shape();
    return Shape(s.begin(), s.end());
}
std::size_t Tensor::numel() const { return checked(node_).value.size(); }
std::size_t Tensor::size(std::int64_t axis) const {
    const auto& s = checked(node_).value.shape();
    const auto rank = static_cast<std::int64_t>(s.size());
    if (axis < -rank || axis >= rank) {
        fail("size", fmt::format("axis {} is out of range for a {}-D tensor (expected {} to {})", axis, rank, -rank, rank - 1));
    }
    return s[static_cast<std::size_t>(axis < 0 ? axis + rank : axis)];
}
double Tensor::element(const std::int64_t* index, std::size_t count) const {
    const Array& v = value();
    if (count != v.dimension()) {
        fail("Tensor()", fmt::format("{} {} for a {}-D tensor of shape {}; element access takes one index per axis", count,
                                     count == 1 ? "index" : "indices", v.dimension(), shape_str(shape())));
    }
    std::size_t flat = 0;
    for (std::size_t i = 0; i < count; ++i) {
        const auto extent = static_cast<std::int64_t>(v.shape()[i]);
        if (index[i] < -extent || index[i] >= extent) {
            fail("Tensor()", fmt::format("index {} is out of bounds for axis {} with size {} (shape {})", index[i], i, extent,
                                         shape_str(shape())));
        }
        flat = flat * v.shape()[i] + static_cast<std::size_t>(index[i] < 0 ? index[i] + extent : index[i]);
    }
    return v.data()[flat];
}
double Tensor::item() const {
    const Array& v = value();
    if (v.size() != 1) fail("item", fmt::format("needs a one-element tensor, got shape {}", shape_str(shape())));
    return v.data()[0];
}
double Tensor::at(const std::vector<std::size_t>& index) const {
    const Array& v = value();
    if (index.size() != v.dimension()) {
        fail("at", fmt::format("index has {} entries for a tensor of shape {}", index.size(), shape_str(shape())));
    }
    std::size_t flat = 0;
    for (std::size_t i = 0; i < index.size(); ++i) {
        if (index[i] >= v.shape()[i]) {
            fail("at", fmt::format("index {} out of range for axis {} of shape {}", index[i], i, shape_str(shape())));
        }
        flat = flat * v.shape()[i] + index[i];
    }
    return v.data()[flat];
}

bool Tensor::requires_grad() const { return checked(node_).requires_grad; }
Tensor& Tensor::requires_grad_(bool on) {
    if (!checked(node_).is_leaf()) {
        fail("requires_grad_", "can only be set on a leaf tensor (this one was made by '" + node_->op + "')");
    }
    node_->requires_grad = on;
    return *this;
}
bool Tensor::is_leaf() const { return checked(node_).is_leaf(); }
const std::string& Tensor::op() const { return checked(node_).op; }
bool Tensor::has_grad() const { return checked(node_).grad.has_value(); }
Tensor Tensor::grad() const {
    if (!has_grad()) return Tensor();
    if (node_->grad_graph) return Tensor(node_->grad_graph);  // from backward(create_graph): differentiable
    settle(*node_);
    return Tensor(*node_->grad, node_->dtype);
}
const Array& Tensor::grad_value() const {
    if (!has_grad()) fail("grad", "this tensor has no gradient (did backward() reach it?)");
    settle(*node_);
    return *node_->grad;
}
Array& Tensor::mutable_grad() {
    if (!has_grad()) fail("grad", "this tensor has no gradient (did backward() reach it?)");
    node_->grad_graph.reset();  // changed outside the graph: grad() is a plain leaf again
    settle(*node_);
    node_->unrounded = node_->dtype == Dtype::Float32;
    return *node_->grad;
}
void Tensor::zero_grad() {
    checked(node_);
    node_->grad.reset();
    node_->grad_graph.reset();
}
void Tensor::retain_grad() { checked(node_), node_->retains_grad = true; }

Tensor Tensor::detach() const { return Tensor(value(), node_->dtype); }

void Tensor::convert_in_place(Dtype dtype) {
    if (!checked(node_).is_leaf()) {
        fail("to", fmt::format("can convert only a leaf in place; this tensor was made by '{}' (use to(dtype), which copies)", node_->op));
    }
    if (node_->dtype == dtype) return;
    settle(*node_);
    mutable_value();
    node_->dtype = dtype;
    node_->unrounded = dtype == Dtype::Float32;
    settle(*node_);
}

Tensor Tensor::to(Dtype dtype) const {
    const Dtype from = checked(node_).dtype;
    if (from == dtype) return *this;
    // d to(a)/da = 1: the gradient goes back converted to a's dtype
    Tensor out = record("to", value(), {*this}, [from](const BackwardContext& c) -> std::vector<Tensor> { return {c.grad.to(from)}; });
    out.node_->dtype = dtype;
    if (dtype == Dtype::Float32) round_to_float32(out.node_->value.data(), out.node_->value.size());
    return out;
}

RemovableHandle Tensor::register_hook(GradHook hook) const {
    const Node& n = checked(node_);
    if (!n.requires_grad) {
        fail("register_hook", "cannot register a hook on a tensor that does not require grad (" + describe(n) + ")");
    }
    if (!hook) fail("register_hook", "the hook is empty");
    const std::uint64_t id = g_hook_ids.fetch_add(1, std::memory_order_relaxed) + 1;
    node_->hooks.emplace_back(id, std::move(hook));
    return RemovableHandle([weak = std::weak_ptr<Node>(node_), id] {
        if (NodePtr node = weak.lock()) {
            auto& hooks = node->hooks;
            for (auto it = hooks.begin(); it != hooks.end(); ++it) {
                if (it->first == id) {
                    hooks.erase(it);
                    break;
                }
            }
        }
    });
}

// ---- the graph walk -----------------------------------------------------------------------

namespace {

// Nodes reachable from the roots that take part in backward, parents before children, as
// pointers to the NodePtrs that hold them (a root's in `roots`, every other one's in its child's
// parents, both alive for the walk). Iterative DFS (post-order) so depth is bounded by memory,
// not by the call stack.
std::vector<const NodePtr*> topological_order(const std::vector<NodePtr>& roots) {
    std::vector<const NodePtr*> order;
    std::unordered_set<Node*> visited;
    for (const NodePtr& root : roots) {
        if (!visited.insert(root.get()).second) continue;
        std::vector<std::pair<const NodePtr*, std::size_t>> stack{{&root, 0}};
        while (!stack.empty()) {
            auto& [node, next] = stack.back();
            if (next < (*node)->parents.size()) {
                const NodePtr* p = &(*node)->parents[next++];
                if ((*p)->requires_grad && visited.insert(p->get()).second) stack.push_back({p, 0});
            } else {
                order.push_back(node);
                stack.pop_back();
            }
        }
    }
    return order;
}

[[noreturn]] void wrong_shape(const std::string& op, std::size_t i, const Shape& got, const Node& input) {
    fail(op + " backward", fmt::format("gradient for input {} has shape {} but the input has shape {}", i, shape_str(got),
                                       shape_str(Shape(input.value.shape().begin(), input.value.shape().end()))));
}

// The gradient after node's hooks, in registration order; a defined result replaces it.
Tensor run_hooks(const Node& node, Tensor g) {
    const auto hooks = node.hooks;  // a copy: a hook may remove itself or another while running
    for (const auto& entry : hooks) {
        Tensor replaced = entry.second(g);
        if (!replaced.defined()) continue;
        if (replaced.value().shape() != node.value.shape()) {
            fail("register_hook", fmt::format("a hook on {} returned a gradient of shape {}; it must keep the shape {}",
                                              describe(node), shape_str(replaced.shape()), shape_str(g.shape())));
        }
        g = std::move(replaced);
    }
    return g;
}

void accumulate(Node& node, Array&& g, const std::string& from_op) {
    if (g.shape() != node.value.shape()) {
        Shape gs(g.shape().begin(), g.shape().end()), vs(node.value.shape().begin(), node.value.shape().end());
        fail(from_op + " backward", fmt::format("produced a gradient of shape {} for an input of shape {}",
                                                shape_str(gs), shape_str(vs)));
    }
    node.grad_graph.reset();
    if (!node.grad) {
        node.grad = std::move(g);
    } else {
        double* dst = node.grad->data();
        const double* src = g.data();
        for (std::size_t i = 0, n = g.size(); i < n; ++i) dst[i] += src[i];
        // a second backward adds to .grad: for a float32 leaf that sum is a float32 store too
        if (node.dtype == Dtype::Float32) round_to_float32(dst, g.size());
    }
}

void check_not_freed(const Node& node) {
    if (node.freed) {
        fail("backward", "trying to backward through the graph a second time: the graph of '" + node.op +
                             "' was freed by an earlier backward(); pass retain_graph=true to the first call");
    }
}

void release(Node& node) {
    node.backward = nullptr;  // releases saved tensors
    node.kernel = nullptr;
    node.freed = true;        // parents stay linked so a second backward can report the error
}

// Where xg::grad wants its answers: the inputs' nodes, each with its positions in `inputs`.
// Without targets the walk is backward(): gradients end in the leaves' .grad.
struct Targets {
    std::unordered_map<Node*, std::vector<std::size_t>> positions;
    // The nodes whose backward leads to a target; others are skipped (pruning, as PyTorch).
    std::unordered_set<Node*> leads;
    void find_leads(const std::vector<const NodePtr*>& order) {  // parents come first in `order`
        for (const NodePtr* n : order) {
            for (const NodePtr& p : (*n)->parents) {
                if (positions.count(p.get()) || leads.count(p.get())) {
                    leads.insert(n->get());
                    break;
                }
            }
        }
    }
};

// A part of a gradient as an array: moved out of its node when nothing else holds it (a
// result the backward just computed), copied when it is shared (the seed, an input, the
// incoming gradient passed through).
Array take_value(Tensor&& t) {
    if (t.node().use_count() == 1) return std::move(t.node()->value);
    return t.value();
}

// Adds a part of input p's gradient to the walk's pending sum, both stored as p's dtype (a
// float32 input sums float32 parts, each sum rounded, as a float32 .grad would).
void add_pending(std::unordered_map<Node*, Array>& pending, Node* p, Array&& part) {
    auto [slot, inserted] = pending.try_emplace(p);
    if (inserted) {
        slot->second = stored_as(p->dtype, std::move(part));
    } else {
        if (p->dtype == Dtype::Float32) round_to_float32(part.data(), part.size());
        double* dst = slot->second.data();
        const double* src = part.data();
        for (std::size_t k = 0, n = slot->second.size(); k < n; ++k) dst[k] += src[k];
        if (p->dtype == Dtype::Float32) round_to_float32(dst, slot->second.size());
    }
}

// The first-order walk: gradients are summed as plain arrays, and each node's backward runs
// with recording off, so its ops compute values and make no nodes. A root's seed is used as the
// caller's tensor, never copied; every other gradient is owned by `pending` and moved into the
// leaf it ends in.
void run_backward(const std::vector<NodePtr>& roots, const std::vector<Tensor>& seeds, bool retain_graph,
                  Targets* targets, std::vector<std::optional<Array>>* captured) {
    const std::vector<const NodePtr*> order = topological_order(roots);
    if (targets) targets->find_leads(order);
    std::unordered_map<Node*, const Tensor*> seed_of;
    for (std::size_t i = 0; i < roots.size(); ++i) {
        auto [slot, inserted] = seed_of.try_emplace(roots[i].get(), &seeds[i]);
        if (!inserted) fail("grad", "the same output is given twice; pass it once");
    }
    // Gradients of non-leaves live only during this walk unless retain_grad() was called.
    std::unordered_map<Node*, Array> pending;
    NoGradGuard no_grad;  // backwards compute values; nothing they do is recorded
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
        const NodePtr& self = **it;
        Node* node = self.get();
        const auto seed = seed_of.find(node);
        Tensor g;
        auto found = pending.find(node);
        const bool summed = found != pending.end();  // else g is the caller's seed
        if (summed) {
            Array owned = std::move(found->second);
            pending.erase(found);
            if (seed != seed_of.end()) owned += seed->second->value();  // a root that is also an input of another root
            g = Tensor(std::move(owned), node->dtype);
        } else if (seed != seed_of.end()) {
            g = *seed->second;
        } else {
            continue;  // no gradient reached this node
        }
        if (!node->hooks.empty()) {  // a hook gets its own copy of the caller's seed
            g = run_hooks(*node, summed ? std::move(g) : Tensor(Array(g.value()), node->dtype));
        }
        if (g_anomaly_mode) check_finite(g.value(), "backward into '" + node->op + "'");
        if (targets) {
            auto target = targets->positions.find(node);
            if (target != targets->positions.end()) {
                for (std::size_t k : target->second) (*captured)[k] = g.value();
            }
            if (node->is_leaf() || !targets->leads.count(node)) continue;
        } else {
            if (node->is_leaf()) {
                accumulate(*node, take_value(std::move(g)), node->op);  // a leaf is the end of the line
                continue;
            }
            if (node->retains_grad) accumulate(*node, Array(g.value()), node->op);
        }
        check_not_freed(*node);
        if (node->kernel) {  // a fused op's hand-written kernel, on plain arrays
            GradContext ctx(g.value(), *node, &pending);
            Grads grads = node->kernel(ctx);
            for (std::size_t i = 0; i < node->parents.size() && i < grads.size(); ++i) {
                Node* p = node->parents[i].get();
                if (!p->requires_grad || !grads[i]) continue;
                if (grads[i]->shape() != p->value.shape()) wrong_shape(node->op, i, Shape(grads[i]->shape().begin(), grads[i]->shape().end()), *p);
                if (g_anomaly_mode) check_finite(*grads[i], "backward of '" + node->op + "'");
                add_pending(pending, p, std::move(*grads[i]));
            }
        } else {  // the op's Backward, its Tensor ops unrecorded
            std::vector<Tensor> grads;
            {
                const bool outer = g_in_backward;
                g_in_backward = true;
                struct Restore {
                    bool value;
                    ~Restore() { g_in_backward = value; }
                } restore{outer};
                grads = node->backward(BackwardContext(g, self));
            }
            g = Tensor();  // a part that is the incoming gradient itself can now be moved, not copied
            for (std::size_t i = 0; i < node->parents.size() && i < grads.size(); ++i) {
                Node* p = node->parents[i].get();
                if (!p->requires_grad || !grads[i].defined()) continue;
                if (grads[i].value().shape() != p->value.shape()) wrong_shape(node->op, i, grads[i].shape(), *p);
                if (g_anomaly_mode) check_finite(grads[i].value(), "backward of '" + node->op + "'");
                add_pending(pending, p, take_value(std::move(grads[i])));
            }
        }
        if (!retain_graph) release(*node);
    }
}

// An op without a differentiable backward under create_graph: its numeric gradients join the
// graph as nodes that depend on the gradient and the inputs, and whose own backward refuses, so
// a second differentiation through them throws instead of silently treating them as constants.
std::vector<Tensor> numeric_backward_in_graph(Node& node, const Tensor& g) {
    std::unordered_map<Node*, Array> added;  // what the closure adds through accumulated()
    Grads grads;
    {
        NoGradGuard no_grad;
        GradContext ctx(g.value(), node, &added);
        grads = node.kernel(ctx);
    }
    std::vector<Tensor> deps{g};
    for (const NodePtr& p : node.parents) deps.push_back(Tensor(p));
    const std::string op = node.op;
    std::vector<Tensor> out(node.parents.size());
    for (std::size_t i = 0; i < node.parents.size(); ++i) {
        Node* p = node.parents[i].get();
        if (!p->requires_grad) continue;
        std::optional<Array> part = i < grads.size() ? std::move(grads[i]) : std::nullopt;
        auto extra = added.find(p);
        if (extra != added.end()) {  // once per parent, even when it is given twice
            if (part) *part += extra->second; else part = std::move(extra->second);
            added.erase(extra);
        }
        if (!part) continue;
        out[i] = record(op + "_backward", std::move(*part), deps, [op](const GradContext&) -> Grads {  // refuses
            fail("backward of '" + op + "_backward'",
                 "'" + op + "' has no double backward: its gradient was computed numerically under create_graph, "
                 "so it cannot be differentiated again (gradients of gradients through '" + op + "' are not implemented)");
        });
    }
    return out;
}

// .grad under create_graph: the gradient as a tensor of the graph that computed it, added to what
// is there. It keeps that graph alive (a reference cycle through `node` until zero_grad()).
void accumulate_in_graph(Node& node, const Tensor& g) {
    if (g.value().shape() != node.value.shape()) wrong_shape(node.op, 0, g.shape(), node);
    const Tensor total = node.grad_graph ? add(Tensor(node.grad_graph), g) : node.grad ? add(Tensor(*node.grad), g) : g;
    node.grad = total.value();
    node.grad_graph = total.node();
}

// The create_graph walk: gradients are tensors, and each node's differentiable backward runs
// with recording on, so the gradients it returns carry a graph of their own.
void run_backward_graph(const std::vector<NodePtr>& roots, const std::vector<Tensor>& seeds, bool retain_graph,
                        Targets* targets, std::vector<Tensor>* captured) {
    const std::vector<const NodePtr*> order = topological_order(roots);
    if (targets) targets->find_leads(order);
    std::unordered_map<Node*, Tensor> pending;
    for (std::size_t i = 0; i < roots.size(); ++i) {
        if (!pending.emplace(roots[i].get(), seeds[i]).second) fail("grad", "the same output is given twice; pass it once");
    }
    EnableGradGuard recording;
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
        const NodePtr& self = **it;
        Node* node = self.get();
        auto found = pending.find(node);
        if (found == pending.end()) continue;
        Tensor g = std::move(found->second);
        pending.erase(found);
        if (!node->hooks.empty()) g = run_hooks(*node, std::move(g));
        if (g_anomaly_mode) check_finite(g.value(), "backward into '" + node->op + "'");
        if (targets) {
            auto target = targets->positions.find(node);
            if (target != targets->positions.end()) {
                for (std::size_t k : target->second) (*captured)[k] = g;
            }
            if (node->is_leaf() || !targets->leads.count(node)) continue;
        } else {
            if (node->is_leaf()) {
                accumulate_in_graph(*node, g);
                continue;
            }
            // A retained gradient is differentiable under create_graph, as a leaf's is (PyTorch's
            // retain_grad hook stores the graph's gradient, not a copy of its value).
            if (node->retains_grad) accumulate_in_graph(*node, g);
        }
        check_not_freed(*node);
        std::vector<Tensor> grads = node->backward ? node->backward(BackwardContext(g, self)) : numeric_backward_in_graph(*node, g);
        for (std::size_t i = 0; i < node->parents.size() && i < grads.size(); ++i) {
            Node* p = node->parents[i].get();
            if (!p->requires_grad || !grads[i].defined()) continue;
            if (grads[i].value().shape() != p->value.shape()) wrong_shape(node->op, i, grads[i].shape(), *p);
            if (g_anomaly_mode) check_finite(grads[i].value(), "backward of '" + node->op + "'");
            const Tensor part = grads[i].dtype() == p->dtype ? grads[i] : grads[i].to(p->dtype);  // p's gradient has p's dtype
            auto [slot, inserted] = pending.try_emplace(p, part);
            if (!inserted) slot->second = add(slot->second, part);
        }
        if (!retain_graph) release(*node);
    }
}

void check_root(const Node& root) {
    if (!root.requires_grad) {
        fail("backward", "this tensor does not require grad and has no grad_fn "
                         "(no input of the computation had requires_grad set, or it ran under NoGradGuard)");
    }
}

}  // namespace

void Tensor::backward(BackwardOptions options) const {
    const Node& n = checked(node_);
    if (n.value.size() != 1) {
        fail("backward", fmt::format("grad can be implicitly created only for scalar outputs; this tensor has shape {} - "
                                     "pass a gradient of that shape",
                                     shape_str(shape())));
    }
    backward(Tensor(Array(xt::ones<double>(n.value.shape())), n.dtype), options);
}

void Tensor::backward(const Tensor& gradient, BackwardOptions options) const {
    checked(node_);
    if (!gradient.defined()) return backward(options);  // libtorch: an undefined gradient means seed 1
    if (gradient.value().shape() != value().shape()) {
        fail("backward", fmt::format("gradient has shape {} but the tensor has shape {}",
                                     shape_str(gradient.shape()), shape_str(shape())));
    }
    check_root(*node_);
    const Tensor seed = gradient.dtype() == node_->dtype ? gradient : gradient.to(node_->dtype);  // as the engine casts every gradient
    if (options.create_graph) {
        run_backward_graph({node_}, {seed}, true, nullptr, nullptr);
    } else {
        run_backward({node_}, {seed}, options.retain_graph, nullptr, nullptr);
    }
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, const GradOptions& options) {
    if (outputs.empty()) fail("grad", "needs at least one output");
    if (!grad_outputs.empty() && grad_outputs.size() != outputs.size()) {
        fail("grad", fmt::format("got {} grad_outputs for {} outputs (give one per output, or none)", grad_outputs.size(),
                                 outputs.size()));
    }
    std::vector<NodePtr> roots;
    std::vector<Tensor> seeds;
    for (std::size_t i = 0; i < outputs.size(); ++i) {
        const Node& out = checked(outputs[i].node());
        if (!out.requires_grad) fail("grad", fmt::format("output {} (shape {}) does not require grad", i, shape_str(outputs[i].shape())));
        const Tensor given = grad_outputs.empty() ? Tensor() : grad_outputs[i];
        if (given.defined()) {
            if (given.shape() != outputs[i].shape()) {
                fail("grad", fmt::format("grad_outputs[{}] has shape {} but output {} has shape {}", i, shape_str(given.shape()), i,
                                         shape_str(outputs[i].shape())));
            }
            seeds.push_back(given.dtype() == out.dtype ? given : given.to(out.dtype));
        } else {
            if (out.value.size() != 1) {
                fail("grad", fmt::format("output {} has shape {}: grad can be implicitly created only for one-element "
                                         "outputs; pass grad_outputs", i, shape_str(outputs[i].shape())));
            }
            seeds.push_back(Tensor(Array(xt::ones<double>(out.value.shape())), out.dtype));
        }
        roots.push_back(outputs[i].node());
    }
    Targets targets;
    for (std::size_t k = 0; k < inputs.size(); ++k) {
        const Node& in = checked(inputs[k].node());
        if (!in.requires_grad) fail("grad", fmt::format("input {} (shape {}) does not require grad", k, shape_str(inputs[k].shape())));
        targets.positions[inputs[k].node().get()].push_back(k);
    }
    std::vector<Tensor> result(inputs.size());
    const bool retain = options.retain_graph || options.create_graph;
    if (options.create_graph) {
        run_backward_graph(roots, seeds, retain, &targets, &result);
    } else {
        std::vector<std::optional<Array>> arrays(inputs.size());
        run_backward(roots, seeds, retain, &targets, &arrays);
        for (std::size_t k = 0; k < inputs.size(); ++k) {
            if (arrays[k]) result[k] = Tensor(std::move(*arrays[k]), inputs[k].dtype());
        }
    }
    for (std::size_t k = 0; k < inputs.size(); ++k) {
        if (!result[k].defined() && !options.allow_unused) {
            fail("grad", fmt::format("input {} (shape {}) was not used to compute the outputs; pass allow_unused = true "
                                     "to get an undefined tensor for it", k, shape_str(inputs[k].shape())));
        }
    }
    return result;
}

// ---- BackwardContext ---------------------------------------------------------------------

Tensor BackwardContext::output() const {
    if (node_->version > node_->recorded_at) {
        const Shape s(node_->value.shape().begin(), node_->value.shape().end());
        modified_in_place(*node_, fmt::format("the output of '{}' (shape {})", node_->op, shape_str(s)));
    }
    return Tensor(node_);
}

Tensor BackwardContext::input(std::size_t i) const {
    const NodePtr& p = node_->parents[i];
    if (p->version > node_->recorded_at) modified_in_place(*node_, fmt::format("input {} of '{}' ({})", i, node_->op, describe(*p)));
    return Tensor(p);
}

Shape BackwardContext::input_shape(std::size_t i) const {
    const auto& s = node_->parents[i]->value.shape();
    return Shape(s.begin(), s.end());
}

std::size_t BackwardContext::num_inputs() const { return node_->parents.size(); }
bool BackwardContext::needs_grad(std::size_t i) const { return node_->parents[i]->requires_grad; }

void Tensor::backward(bool retain_graph) const { backward(BackwardOptions{retain_graph}); }

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
    backward(gradient, BackwardOptions{retain_graph});
}

// ---- modes --------------------------------------------------------------------------------

bool grad_mode_enabled() { return g_grad_mode; }
NoGradGuard::NoGradGuard() : previous_(g_grad_mode) { g_grad_mode = false; }
NoGradGuard::~NoGradGuard() { g_grad_mode = previous_; }
EnableGradGuard::EnableGradGuard() : previous_(g_grad_mode) { g_grad_mode = true; }
EnableGradGuard::~EnableGradGuard() { g_grad_mode = previous_; }

void set_anomaly_mode(bool on) { g_anomaly_mode = on; }
bool anomaly_mode_enabled() { return g_anomaly_mode; }
AnomalyModeGuard::AnomalyModeGuard() : previous_(g_anomaly_mode) { g_anomaly_mode = true; }
AnomalyModeGuard::~AnomalyModeGuard() { g_anomaly_mode = previous_; }

std::size_t live_node_count() { return g_live_nodes.load(); }

namespace {

Tensor record_node(std::string op, Array value, std::vector<Tensor>& inputs, Backward backward, KernelBackward kernel,
                   std::vector<SavedInfo> saved) {
    if (g_anomaly_mode && !g_in_backward) check_finite(value, "forward of '" + op + "'");
    bool needs = false;
    if (g_grad_mode) {
        for (const Tensor& t : inputs) needs = needs || checked(t.node()).requires_grad;
    }
    NodePtr node = new_node();
    node->dtype = result_dtype(inputs);
    node->value = stored_as(node->dtype, std::move(value));
    if (needs) {
        node->requires_grad = true;
        node->op = std::move(op);
        node->backward = std::move(backward);
        node->kernel = std::move(kernel);
        node->saved = std::move(saved);
        node->parents.reserve(inputs.size());
        for (Tensor& t : inputs) node->parents.push_back(t.node());
        node->recorded_at = g_clock.load(std::memory_order_relaxed);
    }
    return Tensor(std::move(node));
}

}  // namespace

Dtype result_dtype(const std::vector<Tensor>& inputs) {
    bool any = false, any_with_axes = false;
    Dtype all = Dtype::Float32, with_axes = Dtype::Float32;
    for (const Tensor& t : inputs) {
        const Node& n = checked(t.node());
        all = any ? promote_types(all, n.dtype) : n.dtype;
        any = true;
        if (n.value.dimension() > 0) {
            with_axes = any_with_axes ? promote_types(with_axes, n.dtype) : n.dtype;
            any_with_axes = true;
        }
    }
    if (!any) return default_dtype();
    return any_with_axes ? with_axes : all;
}

Tensor record(std::string op, Array value, std::vector<Tensor> inputs, Backward backward, std::vector<SavedInfo> saved) {
    return record_node(std::move(op), std::move(value), inputs, std::move(backward), nullptr, std::move(saved));
}

Tensor record(std::string op, Array value, std::vector<Tensor> inputs, KernelBackward kernel, std::vector<SavedInfo> saved,
              Backward backward) {
    return record_node(std::move(op), std::move(value), inputs, std::move(backward), std::move(kernel), std::move(saved));
}

// ---- creation -----------------------------------------------------------------------------

Array empty_array(const Shape& shape) {
    Array a = Array::from_shape(shape);  // uninitialised for double: no page is touched yet
    detail::advise_huge_pages(a.data(), a.size() * sizeof(double));
    return a;
}

Array empty_like(const Array& a) { return empty_array(Shape(a.shape().begin(), a.shape().end())); }

Tensor zeros(const Shape& shape, bool rg) { return zeros(shape, default_dtype(), rg); }
Tensor zeros(const Shape& shape, Dtype dtype, bool rg) { return Tensor(Array(xt::zeros<double>(shape)), dtype, rg); }
Tensor ones(const Shape& shape, bool rg) { return ones(shape, default_dtype(), rg); }
Tensor ones(const Shape& shape, Dtype dtype, bool rg) { return Tensor(Array(xt::ones<double>(shape)), dtype, rg); }
Tensor full(const Shape& shape, double fill, bool rg) { return full(shape, fill, default_dtype(), rg); }
Tensor full(const Shape& shape, double fill, Dtype dtype, bool rg) {
    Array a = Array::from_shape(shape);
    a.fill(fill);
    return Tensor(std::move(a), dtype, rg);
}
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype()); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), t.dtype()); }
Tensor arange(double end) { return arange(0.0, end, 1.0); }
Tensor arange(double start, double end, double step) { return arange(start, end, step, default_dtype()); }
Tensor arange(double start, double end, double step, Dtype dtype) {
    if (step == 0.0 || !std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step)) {
        fail("arange", fmt::format("needs finite bounds and a non-zero step, got start={} end={} step={}", start, end, step));
    }
    const double count = std::ceil((end - start) / step);
    const std::size_t n = count > 0 ? static_cast<std::size_t>(count) : 0;
    Array a = Array::from_shape({n});
    for (std::size_t i = 0; i < n; ++i) a(i) = start + step * static_cast<double>(i);
    return Tensor(std::move(a), dtype);
}
Tensor scalar(double value, bool rg) { return scalar(value, default_dtype(), rg); }
Tensor scalar(double value, Dtype dtype, bool rg) {
    Array a = Array::from_shape({});
    a() = value;
    return Tensor(std::move(a), dtype, rg);
}

}  // namespace xg
