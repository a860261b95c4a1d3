#include "core/tensor.hpp"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "core/memory.hpp"

namespace xg {

namespace {
thread_local bool g_grad_mode = true;
bool g_anomaly_mode = false;
std::atomic<std::size_t> g_live_nodes{0};
// Ticks once per in-place change of any value (Node::version, Node::recorded_at).
std::atomic<std::uint64_t> g_clock{0};

NodePtr new_node() {
    ++g_live_nodes;
    return std::shared_ptr<Node>(new Node(), [](Node* n) {
        --g_live_nodes;
        delete n;
    });
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

Tensor::Tensor(Array value, bool requires_grad) : node_(new_node()) {
    node_->value = std::move(value);
    node_->requires_grad = requires_grad;
}
Tensor::Tensor(std::initializer_list<ListElement> v) : Tensor(Array::from_shape({v.size()})) {
    std::size_t i = 0;
    for (const ListElement& e : v) node_->value.data()[i++] = e.value;
}
Tensor::Tensor(xt::nested_initializer_list_t<double, 2> v) : Tensor(Array(v)) {}
Tensor::Tensor(xt::nested_initializer_list_t<double, 3> v) : Tensor(Array(v)) {}
Tensor::Tensor(xt::nested_initializer_list_t<double, 4> v) : Tensor(Array(v)) {}

static const Node& checked(const NodePtr& n) {
    if (!n) throw Error("Tensor: use of an undefined tensor (default-constructed)");
    return *n;
}

const Array& Tensor::value() const { return checked(node_).value; }
Array& Tensor::mutable_value() {
    checked(node_);
    node_->version = g_clock.fetch_add(1, std::memory_order_relaxed) + 1;
    return node_->value;
}
Shape Tensor::shape() const {
    const auto& s = value().shape();
    return Shape(s.begin(), s.end());
}
std::size_t Tensor::size(std::int64_t axis) const {
    const auto& s = value().shape();
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
    return Tensor(*node_->grad);
}
const Array& Tensor::grad_value() const {
    if (!has_grad()) fail("grad", "this tensor has no gradient (did backward() reach it?)");
    return *node_->grad;
}
Array& Tensor::mutable_grad() {
    if (!has_grad()) fail("grad", "this tensor has no gradient (did backward() reach it?)");
    return *node_->grad;
}
void Tensor::zero_grad() { checked(node_), node_->grad.reset(); }
void Tensor::retain_grad() { checked(node_), node_->retains_grad = true; }

Tensor Tensor::detach() const { return Tensor(value()); }

// ---- the graph walk -----------------------------------------------------------------------

namespace {

// Nodes reachable from root that take part in backward, parents before children. Iterative DFS
// (post-order) so depth is bounded by memory, not by the call stack.
std::vector<Node*> topological_order(Node* root) {
    std::vector<Node*> order;
    std::unordered_set<Node*> visited;
    std::vector<std::pair<Node*, std::size_t>> stack{{root, 0}};
    visited.insert(root);
    while (!stack.empty()) {
        auto& [node, next] = stack.back();
        if (next < node->parents.size()) {
            Node* p = node->parents[next++].get();
            if (p->requires_grad && visited.insert(p).second) stack.push_back({p, 0});
        } else {
            order.push_back(node);
            stack.pop_back();
        }
    }
    return order;
}

void accumulate(Node& node, Array&& g, const std::string& from_op) {
    if (g.shape() != node.value.shape()) {
        Shape gs(g.shape().begin(), g.shape().end()), vs(node.value.shape().begin(), node.value.shape().end());
        fail(from_op + " backward", fmt::format("produced a gradient of shape {} for an input of shape {}",
                                                shape_str(gs), shape_str(vs)));
    }
    if (!node.grad) {
        node.grad = std::move(g);
    } else {
        double* dst = node.grad->data();
        const double* src = g.data();
        for (std::size_t i = 0, n = g.size(); i < n; ++i) dst[i] += src[i];
    }
}

// The root's closure reads `seed` by reference, so a caller's gradient is never copied; every
// other gradient is owned by `pending` and moved into the leaf it ends in.
void run_backward(const NodePtr& root, const Array& seed, BackwardOptions options) {
    if (!root->requires_grad) {
        fail("backward", "this tensor does not require grad and has no grad_fn "
                         "(no input of the computation had requires_grad set, or it ran under NoGradGuard)");
    }
    std::vector<Node*> order = topological_order(root.get());
    // Gradients of non-leaves live only during this walk unless retain_grad() was called.
    std::unordered_map<Node*, Array> pending;
    NoGradGuard no_grad;  // closures compute plain arrays; nothing they do is recorded
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
        Node* node = *it;
        const bool is_root = node == root.get();
        Array owned;
        if (!is_root) {
            auto found = pending.find(node);
            if (found == pending.end()) continue;  // no gradient reached this node
            owned = std::move(found->second);
            pending.erase(found);
        }
        const Array& g = is_root ? seed : owned;
        if (g_anomaly_mode) check_finite(g, "backward into '" + node->op + "'");
        if (node->is_leaf()) {
            accumulate(*node, is_root ? Array(g) : std::move(owned), node->op);  // a leaf is the end of the line
            continue;
        }
        if (node->retains_grad) accumulate(*node, Array(g), node->op);
        if (node->freed) {
            fail("backward", "trying to backward through the graph a second time: the graph of '" + node->op +
                                 "' was freed by an earlier backward(); pass retain_graph=true to the first call");
        }
        GradContext ctx(g, *node, &pending);
        Grads grads = node->backward(ctx);
        for (std::size_t i = 0; i < node->parents.size() && i < grads.size(); ++i) {
            Node* p = node->parents[i].get();
            if (!p->requires_grad || !grads[i]) continue;
            if (grads[i]->shape() != p->value.shape()) {
                Shape gs(grads[i]->shape().begin(), grads[i]->shape().end());
                fail(node->op + " backward", fmt::format("gradient for input {} has shape {} but the input has shape {}",
                                                         i, shape_str(gs), shape_str(Shape(p->value.shape().begin(), p->value.shape().end()))));
            }
            if (g_anomaly_mode) check_finite(*grads[i], "backward of '" + node->op + "'");
            auto [slot, inserted] = pending.try_emplace(p);
            if (inserted) {
                slot->second = std::move(*grads[i]);
            } else {
                double* dst = slot->second.data();
                const double* src = grads[i]->data();
                for (std::size_t k = 0, n = slot->second.size(); k < n; ++k) dst[k] += src[k];
            }
        }
        if (!options.retain_graph) {
            node->backward = nullptr;  // releases saved tensors
            node->freed = true;        // parents stay linked so a second backward can report the error
        }
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
    const Array seed = xt::ones<double>(n.value.shape());
    run_backward(node_, seed, options);
}

void Tensor::backward(const Tensor& gradient, BackwardOptions options) const {
    checked(node_);
    if (!gradient.defined()) return backward(options);  // libtorch: an undefined gradient means seed 1
    if (gradient.value().shape() != value().shape()) {
        fail("backward", fmt::format("gradient has shape {} but the tensor has shape {}",
                                     shape_str(gradient.shape()), shape_str(shape())));
    }
    run_backward(node_, gradient.value(), options);
}

void Tensor::backward(bool retain_graph) const { backward(BackwardOptions{retain_graph}); }

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
    backward(gradient, BackwardOptions{retain_graph});
}

// ---- modes --------------------------------------------------------------------------------

bool grad_mode_enabled() { return g_grad_mode; }
NoGradGuard::NoGradGuard() : previous_(g_grad_mode) { g_grad_mode = false; }
NoGradGuard::~NoGradGuard() { g_grad_mode = previous_; }

void set_anomaly_mode(bool on) { g_anomaly_mode = on; }
bool anomaly_mode_enabled() { return g_anomaly_mode; }
AnomalyModeGuard::AnomalyModeGuard() : previous_(g_anomaly_mode) { g_anomaly_mode = true; }
AnomalyModeGuard::~AnomalyModeGuard() { g_anomaly_mode = previous_; }

std::size_t live_node_count() { return g_live_nodes.load(); }

Tensor record(std::string op, Array value, std::vector<Tensor> inputs, BackwardFn backward,
              std::vector<SavedInfo> saved) {
    if (g_anomaly_mode) check_finite(value, "forward of '" + op + "'");
    bool needs = false;
    if (g_grad_mode) {
        for (const Tensor& t : inputs) needs = needs || checked(t.node()).requires_grad;
    }
    NodePtr node = new_node();
    node->value = std::move(value);
    if (needs) {
        node->requires_grad = true;
        node->op = std::move(op);
        node->backward = std::move(backward);
        node->saved = std::move(saved);
        node->parents.reserve(inputs.size());
        for (Tensor& t : inputs) node->parents.push_back(t.node());
        node->recorded_at = g_clock.load(std::memory_order_relaxed);
    }
    return Tensor(std::move(node));
}

// ---- creation -----------------------------------------------------------------------------

Array empty_array(const Shape& shape) {
    Array a = Array::from_shape(shape);  // uninitialised for double: no page is touched yet
    detail::advise_huge_pages(a.data(), a.size() * sizeof(double));
    return a;
}

Array empty_like(const Array& a) { return empty_array(Shape(a.shape().begin(), a.shape().end())); }

Tensor zeros(const Shape& shape, bool rg) { return Tensor(Array(xt::zeros<double>(shape)), rg); }
Tensor ones(const Shape& shape, bool rg) { return Tensor(Array(xt::ones<double>(shape)), rg); }
Tensor full(const Shape& shape, double fill, bool rg) {
    Array a = Array::from_shape(shape);
    a.fill(fill);
    return Tensor(std::move(a), rg);
}
Tensor zeros_like(const Tensor& t) { return zeros(t.shape()); }
Tensor ones_like(const Tensor& t) { return ones(t.shape()); }
Tensor arange(double end) { return arange(0.0, end, 1.0); }
Tensor arange(double start, double end, double step) {
    if (step == 0.0 || !std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step)) {
        fail("arange", fmt::format("needs finite bounds and a non-zero step, got start={} end={} step={}", start, end, step));
    }
    const double count = std::ceil((end - start) / step);
    const std::size_t n = count > 0 ? static_cast<std::size_t>(count) : 0;
    Array a = Array::from_shape({n});
    for (std::size_t i = 0; i < n; ++i) a(i) = start + step * static_cast<double>(i);
    return Tensor(std::move(a));
}
Tensor scalar(double value, bool rg) {
    Array a = Array::from_shape({});
    a() = value;
    return Tensor(std::move(a), rg);
}

}  // namespace xg
