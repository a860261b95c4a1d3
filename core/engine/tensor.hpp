// xg::Tensor: a cheap handle to a graph node that holds a value, an optional gradient and,
// for results of ops, the backward closure and the parents that made it.
// See docs/architecture.md for who owns what and how backward() walks the graph.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include <xtensor/xarray.hpp>

#include "core/engine/dtype.hpp"

namespace xg {

/// The storage of a float64 tensor: a row-major, double-precision xtensor array. Every op can
/// read any tensor as one (Tensor::value(); a float32 tensor then widens into a float64 mirror).
using Array = xt::xarray<double>;
/// The storage of a float32 tensor (Tensor::values<float>()): what native float32 kernels read
/// and write, at half the memory of an Array.
using FloatArray = xt::xarray<float>;
/// The storage of a bfloat16 tensor (Tensor::values<bfloat16>()), a quarter of an Array's memory.
using BFloat16Array = xt::xarray<bfloat16>;
/// The storage of a tensor of a dtype narrower than float64, in its own storage type: the
/// alternatives follow XG_FOR_EACH_STORAGE_TYPE after double (a new storage type is one more here).
using NarrowArray = std::variant<FloatArray, BFloat16Array>;
/// A tensor shape, outermost axis first.
using Shape = std::vector<std::size_t>;

/// a's shape as a Shape.
inline Shape shape_of(const Array& a) { return Shape(a.shape().begin(), a.shape().end()); }
/// A 0-d array holding v (how a saved scalar is stored: a step count, a learning rate).
inline Array scalar_array(double v) {
    Array a = Array::from_shape(Shape{});
    a() = v;
    return a;
}

/// The one exception type xgrad throws for bad input; the message names the operation and the
/// shapes or values involved.
class Error : public std::invalid_argument {
public:
    using std::invalid_argument::invalid_argument;
};

/// Formats a shape as "(2, 3, 4)" for error messages.
std::string shape_str(const Shape& shape);
/// NumPy broadcast of two shapes; throws naming `op` and both shapes when they do not broadcast.
/// (Here rather than with the ops: the kernels' broadcast walk, core/fast/strided.hpp, needs it.)
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

/// Throws xg::Error("<op>: <fmt message>") - the single way ops report bad input.
[[noreturn]] void fail(const std::string& op, const std::string& message);

struct Node;
/// Shared ownership of a graph node: tensors and their children's parent lists hold these.
using NodePtr = std::shared_ptr<Node>;

class Tensor;

/// What an op's backward sees (xg::record): the gradient flowing into the op's output and the
/// op's inputs and output, all as Tensors, so the backward is written with ordinary ops. The
/// graph walk runs it unrecorded for a first-order backward (no nodes are made, the ops only
/// compute) and recorded under create_graph (the gradients it returns are then differentiable
/// again). Reading input(i) or output() checks that the value has not changed in place since the
/// forward recorded the node (Node::version) and throws xg::Error naming the op and the tensor
/// otherwise; shapes are never checked, so an op that reads only shapes (add) does not mind
/// in-place changes, as in PyTorch.
class BackwardContext {
public:
    /// The context of `node`'s backward, fed the gradient `grad`.
    BackwardContext(const Tensor& grad, const NodePtr& node) : grad(grad), node_(node) {}
    const Tensor& grad;  ///< dLoss/dOutput, same shape as the output (it may require grad itself)
    /// The op's forward result, as the forward left it (its node is this op's node).
    Tensor output() const;
    /// Input i (i < num_inputs()) as the tensor the forward was given.
    Tensor input(std::size_t i) const;
    /// The shape of input i (shapes are not versioned: reading one is always allowed).
    Shape input_shape(std::size_t i) const;
    /// The number of inputs given to record().
    std::size_t num_inputs() const;
    bool needs_grad(std::size_t i) const; ///< false when input i needs no gradient: skip its work

private:
    const NodePtr& node_;
};

/// An op's backward, written once with differentiable ops: maps dLoss/dOutput to one Tensor per
/// input (an undefined Tensor for an input that needs none). It must not capture NodePtrs or
/// Tensors (inputs are reachable through the context); that keeps the graph acyclic and lets
/// backward() free it.
using Backward = std::function<std::vector<Tensor>(const BackwardContext&)>;

/// What a hand-written kernel backward sees (the fused ops of nn/, record()'s second form): the
/// gradient and the values as plain arrays, read through the node with the same version checks
/// as BackwardContext.
class GradContext {
public:
    /// The context of `node`'s kernel, fed the gradient `grad`; `pending` holds the walk's
    /// gradients of the nodes it has not reached yet (for accumulated(); may be null).
    GradContext(const Array& grad, Node& node, std::unordered_map<Node*, Array>* pending = nullptr,
                const Tensor* native_grad = nullptr)
        : grad(grad), node_(node), pending_(pending), native_grad_(native_grad) {}
    const Array& grad;  ///< dLoss/dOutput, same shape as output (float64 values; a narrower node's widened)
    /// The op's forward result, as the forward left it.
    const Array& output() const;
    /// The value of input i (i < num_inputs()), as the forward saw it.
    const Array& input(std::size_t i) const;
    /// What a kernel on storage type T reads: dLoss/dOutput, the output and input i. For T =
    /// double, the float64 values above (grad, output(), input(i)); for a narrower T, that
    /// tensor's own storage as it is (no float64 mirror is made), and xg::Error when the tensor
    /// is of another dtype.
    template <class T>
    const xt::xarray<T>& grad_values() const;
    template <class T>
    const xt::xarray<T>& output_values() const;
    template <class T>
    const xt::xarray<T>& input_values(std::size_t i) const;
    /// The shape of input i (shapes are not versioned: reading one is always allowed).
    Shape input_shape(std::size_t i) const;
    /// The number of inputs given to record().
    std::size_t num_inputs() const;
    bool needs_grad(std::size_t i) const; ///< false when input i needs no gradient: skip its work
    /// The gradient of input i summed so far in this backward pass (zeros before the first
    /// contribution), for a kernel that adds its part in place and returns std::nullopt for
    /// input i: a weight used at every step of a sequence takes its GEMM with beta = 1. Only for
    /// inputs with needs_grad(i); the sum is the same as returning the part. NaN checks of
    /// anomaly mode see such a part when the walk reaches input i.
    Array& accumulated(std::size_t i) const;

private:
    Node& node_;  // reading a narrower value as float64 makes its mirror
    std::unordered_map<Node*, Array>* pending_;  // the walk's gradients of nodes not reached yet
    const Tensor* native_grad_;                  // the incoming gradient in its own storage
};

/// One input's gradient from a kernel backward: values of any storage type (float64 ones, or a
/// native kernel's own storage type) or none. The walk converts it to the input's dtype.
class GradPart {
public:
    GradPart() = default;
    GradPart(std::nullopt_t) {}
    template <class T>
    GradPart(xt::xarray<T> values) : values_(std::move(values)) {}
    GradPart(std::optional<Array> values) {
        if (values) values_ = std::move(*values);
    }
    GradPart& operator=(std::nullopt_t) { values_ = std::monostate(); return *this; }
    explicit operator bool() const { return values_.index() != 0; }
    bool has_value() const { return bool(*this); }
    /// The values in storage type T (throws unless it holds them).
    template <class T>
    xt::xarray<T>& values();
    /// The values converted to storage type T (moved out when they are of that type already;
    /// rounded once when narrowed). It must hold values.
    template <class T>
    xt::xarray<T> take_as();
    /// A copy of the values as float64 (exact; empty when it holds none).
    Array to_float64() const;
    /// The shape of what it holds.
    Shape shape() const;

private:
    std::variant<std::monostate, Array, FloatArray, BFloat16Array> values_;
};

/// One optional gradient per input (empty for inputs that need none).
using Grads = std::vector<GradPart>;
/// The Grads of a kernel backward, its parts moved in: `return {std::move(dx)};` would copy every
/// array, as a braced list's elements are const.
template <class... Parts>
Grads grads_of(Parts&&... parts) {
    Grads g;
    g.reserve(sizeof...(parts));
    (g.emplace_back(std::forward<Parts>(parts)), ...);
    return g;
}

/// A hand-written first-order backward on arrays (a fused op's kernel): maps dLoss/dOutput to
/// dLoss/dInput_i. The same rule as Backward: no captured NodePtrs or Tensors.
using KernelBackward = std::function<Grads(const GradContext&)>;

/// A saved quantity a node keeps for backward, for graph pictures (xg::to_dot) and docs.
struct SavedInfo {
    /// What the closure keeps, e.g. "mean" or "rstd".
    std::string name;
    /// Its shape (bytes = 8 * elements, shown by to_dot).
    Shape shape;
};

/// What Tensor::register_hook and the module hooks return: remove() unregisters the hook (a
/// second call does nothing). Dropping the handle keeps the hook, as PyTorch's RemovableHandle.
class RemovableHandle {
public:
    RemovableHandle() = default;
    /// A handle whose remove() runs `remover` once.
    explicit RemovableHandle(std::function<void()> remover) : remover_(std::move(remover)) {}
    /// Unregisters the hook; harmless when it is already gone or its tensor or module is.
    void remove() {
        std::function<void()> r = std::move(remover_);
        remover_ = nullptr;
        if (r) r();
    }

private:
    std::function<void()> remover_;
};

/// A gradient hook (Tensor::register_hook): sees dLoss/dTensor once it is fully accumulated and
/// returns a replacement of the same shape, or an undefined Tensor to keep it.
using GradHook = std::function<Tensor(const Tensor&)>;
/// A hook on a leaf (Tensor::register_post_accumulate_grad_hook): called with the leaf once
/// backward has added its gradient to .grad.
using PostAccumulateGradHook = std::function<void(const Tensor&)>;

/// A vertex of the autograd graph. Users hold it through xg::Tensor.
///
/// A float64 node keeps its values in `value` and its gradient in `grad`. A node of a narrower
/// dtype (float32, bfloat16) keeps them in its own storage type in `narrow_value` and
/// `narrow_grad`; `value` and `grad` are then float64 mirrors made only when someone reads the
/// tensor as float64 (Tensor::value(), an op on mixed dtypes). A mirror lives as long as the node
/// (a reference handed out stays valid); writes through it are rounded into the node's storage at
/// the next read (Node::Mirror::Written).
struct Node {
    /// The state of a narrower node's float64 mirror of its value or gradient.
    enum class Mirror : unsigned char {
        None,     ///< no mirror: the float64 member is empty
        Clean,    ///< the mirror holds the node's stored values, widened
        Written,  ///< handed out for writing: the stored values are stale until settled
        Stale,    ///< the stored values were written natively: the mirror is refreshed at its next read
    };
    /// The forward result (float64 node), or a narrower node's float64 mirror (value_mirror).
    Array value;
    /// A narrower node's values, in its dtype's storage type.
    NarrowArray narrow_value;
    /// The number format of value and grad.
    Dtype dtype = Dtype::Float64;
    Mirror value_mirror = Mirror::None;  ///< narrower nodes: the state of `value`
    Mirror grad_mirror = Mirror::None;   ///< narrower nodes: the state of `grad`
    /// When `value` last changed in place (0: never): every Tensor::mutable_value() sets it to the
    /// next tick of one process-wide counter, so versions only grow.
    std::uint64_t version = 0;
    /// The counter's reading when record() made this node. A value its closure reads whose version
    /// is later was changed after the forward used it: GradContext refuses it.
    std::uint64_t recorded_at = 0;
    /// dLoss/dValue once backward reached this node (kept on leaves and retain_grad nodes); a
    /// narrower node's float64 mirror of narrow_grad (grad_mirror).
    std::optional<Array> grad;
    /// A narrower node's gradient, in its dtype's storage type.
    std::optional<NarrowArray> narrow_grad;
    /// Whether backward computes a gradient for this node.
    bool requires_grad = false;
    bool retains_grad = false;     ///< keep .grad on a non-leaf after backward
    bool freed = false;            ///< backward already released this node's closure
    /// Made by a native kernel of a narrower dtype (record() given its storage type's array): its
    /// kernel backward reads the gradient through GradContext::grad_values<T>() only
    /// (GradContext::grad is then empty), so the walk widens nothing.
    bool native = false;
    /// The op that made it ("add", "layer_norm", ...), or "leaf".
    std::string op = "leaf";
    /// The op's inputs, in the order given to record().
    std::vector<NodePtr> parents;
    /// The op's backward in Tensor ops (record()): maps dLoss/dValue to the parents' gradients,
    /// unrecorded for first order, recorded under create_graph. Empty on leaves and once freed.
    Backward backward;
    /// A fused op's hand-written first-order kernel (record()'s second form); when set, a
    /// first-order backward runs it instead of `backward`. Empty on leaves and once freed.
    KernelBackward kernel;
    /// Under create_graph, .grad of a leaf as a tensor of the graph that computed it (it keeps
    /// that graph alive, a reference cycle through this leaf until zero_grad(), as in PyTorch).
    NodePtr grad_graph;
    std::vector<SavedInfo> saved;  ///< extra tensors the closure keeps (beyond inputs/output)
    /// Gradient hooks with their ids, in registration order (empty: the walk skips them).
    std::vector<std::pair<std::uint64_t, GradHook>> hooks;
    /// A leaf's hooks run after its .grad was updated, with their ids, in registration order.
    std::vector<std::pair<std::uint64_t, PostAccumulateGradHook>> post_accumulate_hooks;

    /// True for tensors not made by an op (inputs, parameters).
    bool is_leaf() const { return op == "leaf"; }
    /// The shape of the values, whichever storage holds them.
    const Array::shape_type& dims() const {
        if (dtype == Dtype::Float64 || value_mirror == Mirror::Written) return value.shape();
        return std::visit([](const auto& v) -> const Array::shape_type& { return v.shape(); }, narrow_value);
    }
    /// Whether a gradient is stored.
    bool has_grad() const { return dtype == Dtype::Float64 ? grad.has_value() : narrow_grad.has_value(); }
    Node() = default;
    Node(const Node&) = delete;
    Node& operator=(const Node&) = delete;
    ~Node(); ///< iterative: a million-node chain tears down without deep recursion
};

/// One number of a 1-D braced list `Tensor({1, 2, 3})`. A class rather than a plain double so
/// that a column literal `Tensor({{1.0}, {2.0}})` is read as 2-D (a list of rows) instead of
/// being ambiguous with a 1-D list whose numbers happen to be braced.
struct ListElement {
    /// Any number converts implicitly.
    ListElement(double v) : value(v) {}
    /// The number.
    double value;
};

/// Options of Tensor::backward.
struct BackwardOptions {
    bool retain_graph = false; ///< keep closures so backward can run through the graph again
    /// Build a differentiable graph of the gradients (implies retain_graph): .grad of each leaf
    /// is then a tensor that can be differentiated again (gradients of gradients).
    bool create_graph = false;
};

/// A handle to a node. Copies share the node (like torch::Tensor); detach() makes a new leaf.
class Tensor {
public:
    Tensor() = default; ///< an undefined tensor; defined() is false
    /// A leaf holding `value` (any shape, including 0-D), of the default dtype.
    explicit Tensor(Array value, bool requires_grad = false);
    /// A leaf holding `value` rounded to `dtype`.
    Tensor(Array value, Dtype dtype, bool requires_grad = false);
    /// A leaf from a braced list: {1, 2, 3} is (3,), {{1, 2}, {3, 4}} is (2, 2), the column
    /// {{1.0}, {2.0}} is (2, 1); up to 4-D, and every row must have the same length.
    Tensor(std::initializer_list<ListElement> values);
    /// A 2-D leaf from nested braces.
    Tensor(xt::nested_initializer_list_t<double, 2> values);
    /// A 3-D leaf from nested braces.
    Tensor(xt::nested_initializer_list_t<double, 3> values);
    /// A 4-D leaf from nested braces.
    Tensor(xt::nested_initializer_list_t<double, 4> values);

    /// False for a default-constructed Tensor (e.g. an absent bias).
    bool defined() const { return node_ != nullptr; }
    /// The number format (xg::kFloat64, xg::kFloat32 or xg::kBFloat16).
    Dtype dtype() const;
    /// This tensor in `dtype`: itself when it already is, otherwise a differentiable copy (its
    /// gradient is converted back to this tensor's dtype), as torch.Tensor.to(dtype).
    Tensor to(Dtype dtype) const;
    /// Converts this leaf's value and gradient to `dtype` in place, so every handle (a module's
    /// parameter, an optimizer's list) sees it: what Module::to does, as PyTorch's
    /// `param.data = param.data.to(dtype)`. A new version, like any in-place change.
    void convert_in_place(Dtype dtype);
    /// A leaf of dtype dtype_of<T>() holding `values` (its own storage, no copy).
    template <class T>
    static Tensor from_values(xt::xarray<T> values, bool requires_grad = false);
    /// A float32 leaf holding `values` (native float32 storage, no copy).
    static Tensor from_float32(FloatArray values, bool requires_grad = false) {
        return from_values(std::move(values), requires_grad);
    }
    /// The values as float64, for any dtype (a narrower tensor's are widened into a mirror kept
    /// with the tensor: see Node); throws xg::Error on an undefined tensor.
    const Array& value() const;
    /// The stored values as they are: T = double for a float64 tensor, float for a float32 one,
    /// xg::bfloat16 for a bfloat16 one (native kernels); throws xg::Error naming both dtypes
    /// otherwise.
    template <class T>
    const xt::xarray<T>& values() const;
    /// Writable native storage (a new version, as mutable_value()).
    template <class T>
    xt::xarray<T>& mutable_values();
    /// The gradient's native storage (T as values<T>()); throws if there is none.
    template <class T>
    const xt::xarray<T>& grad_values() const;
    /// Writable native gradient storage; throws if there is none.
    template <class T>
    xt::xarray<T>& mutable_grad_values();
    /// Writable storage for in-place updates outside the graph (optimizers, initialisers). Each
    /// call gives the tensor a new version, so a pending backward that would read the old value
    /// throws instead of computing a wrong gradient: write through the reference right away
    /// rather than keeping it across a forward. A float32 tensor's writes are rounded at the next
    /// value()/data() read (shape(), size(), numel() and dim() do not count), so finish writing first.
    Array& mutable_value();
    /// The shape, outermost axis first (empty for 0-D).
    Shape shape() const;
    /// Number of axes.
    std::size_t dim() const { return shape().size(); }
    /// Extent of one axis; a negative axis counts from the end (size(-1) is the last).
    std::size_t size(std::int64_t axis) const;
    /// Number of elements.
    std::size_t numel() const;
    /// Writable row-major contiguous storage, for plain loops (a new version, as mutable_value()).
    double* data() { return mutable_value().data(); }
    /// Read-only row-major contiguous storage.
    const double* data() const { return value().data(); }
    /// The value of a one-element tensor.
    double item() const;
    /// Element access with one integer index per axis, e.g. t(1, 2); negative indices count from
    /// the end (t(-1, -1) is the last element). Throws xg::Error for another number of indices
    /// or an index out of bounds. Kernels index value() or data() directly, unchecked.
    template <class... Idx>
    double operator()(Idx... idx) const {
        static_assert((std::is_integral_v<Idx> && ...), "Tensor(): indices must be integers");
        const std::int64_t index[] = {static_cast<std::int64_t>(idx)..., 0};  // the 0 keeps t() well-formed
        return element(index, sizeof...(Idx));
    }
    /// Element access by a full index vector.
    double at(const std::vector<std::size_t>& index) const;

    /// Whether backward computes a gradient for this tensor.
    bool requires_grad() const;
    /// Sets requires_grad on a leaf (returns *this for chaining).
    Tensor& requires_grad_(bool on = true);
    /// True unless an op that recorded a graph node made this tensor.
    bool is_leaf() const;
    /// The name of the op that made it ("leaf" for leaves).
    const std::string& op() const;

    /// True once a gradient has been accumulated into this tensor.
    bool has_grad() const;
    /// The accumulated gradient as a new leaf tensor (undefined if none).
    Tensor grad() const;
    /// The accumulated gradient storage; throws if there is none.
    const Array& grad_value() const;
    /// Writable gradient storage (for clipping and optimizers); throws if there is none. A float32
    /// tensor's writes are rounded into its float32 gradient at the next read.
    Array& mutable_grad();
    /// Sets the gradient to `g` (its shape, converted to this tensor's dtype); for code that fills
    /// gradients itself (data-parallel buckets).
    void set_grad(const Array& g);
    /// Clears the accumulated gradient.
    void zero_grad();
    /// Keep this non-leaf's gradient after backward (leaves always keep theirs).
    void retain_grad();

    /// Backpropagates from a one-element tensor with seed 1.
    void backward(BackwardOptions options = {}) const;
    /// Backpropagates with an explicit dLoss/dThis of this tensor's shape (an undefined
    /// `gradient` means seed 1, for a one-element tensor, as in libtorch).
    void backward(const Tensor& gradient, BackwardOptions options = {}) const;
    /// backward() keeping the graph when retain_graph is true: `loss.backward(true)` (also
    /// spelled `loss.backward({true})`).
    void backward(bool retain_graph) const;
    /// libtorch's positional spelling: `loss.backward({}, true)`, `y.backward(g, true)`.
    void backward(const Tensor& gradient, bool retain_graph) const;

    /// Registers `hook` on this tensor's gradient (PyTorch's Tensor.register_hook): every
    /// backward or xg::grad that reaches this tensor calls it with dLoss/dThis once all
    /// contributions are summed, before a leaf stores it in .grad and before a non-leaf passes it
    /// to its inputs. A defined result (same shape) replaces the gradient from then on; an
    /// undefined Tensor keeps it. Hooks run in registration order, each seeing the previous one's
    /// result. Under create_graph the hook sees a differentiable tensor and its ops are recorded.
    /// Throws xg::Error when this tensor does not require grad. A hook that captures this tensor
    /// keeps its graph alive until the hook is removed.
    RemovableHandle register_hook(GradHook hook) const;
    /// A hook that only observes: `x.register_hook([&](const Tensor& g) { norms.push_back(...); })`.
    template <class F, std::enable_if_t<std::is_void_v<std::invoke_result_t<F&, const Tensor&>>, int> = 0>
    RemovableHandle register_hook(F observe) const {
        return register_hook(GradHook([observe = std::move(observe)](const Tensor& g) mutable {
            observe(g);
            return Tensor();
        }));
    }

    /// Registers `hook` on a leaf that requires grad (PyTorch's
    /// Tensor.register_post_accumulate_grad_hook): every backward that reaches the leaf calls
    /// `hook(leaf)` right after adding the gradient to .grad, while the walk goes on to the rest
    /// of the graph (DistributedDataParallel starts reducing a bucket from there). xg::grad,
    /// which writes no .grad, does not call it. Throws xg::Error on a non-leaf or a tensor that
    /// does not require grad.
    RemovableHandle register_post_accumulate_grad_hook(PostAccumulateGradHook hook) const;

    /// A new leaf sharing nothing with the graph (value copied, same dtype, requires_grad false).
    Tensor detach() const;

    /// The underlying graph node (for graph walkers such as to_dot).
    const NodePtr& node() const { return node_; }
    /// Wraps an existing node (shares it).
    explicit Tensor(NodePtr node) : node_(std::move(node)) {}

private:
    double element(const std::int64_t* index, std::size_t count) const;
    NodePtr node_;
};

/// Whether ops currently record the graph (false inside a NoGradGuard).
bool grad_mode_enabled();

/// Disables graph recording in its scope, like torch::NoGradGuard.
class NoGradGuard {
public:
    NoGradGuard();
    ~NoGradGuard();
    NoGradGuard(const NoGradGuard&) = delete;
    NoGradGuard& operator=(const NoGradGuard&) = delete;

private:
    bool previous_;
};

/// Turns graph recording on in its scope, even inside a NoGradGuard (torch::AutoGradMode(true)):
/// create_graph and gradgradcheck record the backward's ops this way.
class EnableGradGuard {
public:
    EnableGradGuard();
    ~EnableGradGuard();
    EnableGradGuard(const EnableGradGuard&) = delete;
    EnableGradGuard& operator=(const EnableGradGuard&) = delete;

private:
    bool previous_;
};

/// Anomaly mode: when on, every op's forward result and every gradient are checked for NaN/inf
/// and the first one found throws xg::Error naming the op that produced it.
void set_anomaly_mode(bool on);
/// Whether anomaly mode is on.
bool anomaly_mode_enabled();

/// Enables anomaly mode in its scope.
class AnomalyModeGuard {
public:
    AnomalyModeGuard();
    ~AnomalyModeGuard();
    AnomalyModeGuard(const AnomalyModeGuard&) = delete;
    AnomalyModeGuard& operator=(const AnomalyModeGuard&) = delete;

private:
    bool previous_;
};

/// The dtype of an op's result on `inputs` (PyTorch's rule): the promotion of the inputs that
/// have at least one axis; only when all are 0-D, of all of them. So a float32 matrix times a
/// float64 0-D tensor stays float32, and float32 with a float64 matrix gives float64.
Dtype result_dtype(const std::vector<Tensor>& inputs);

/// Records the result of op `op` on `inputs`: a leaf when no input needs a gradient or grad mode
/// is off, otherwise a node whose backward is `backward`, written once in Tensor ops. The one way
/// every op joins the graph: a first-order backward runs `backward` without recording, and
/// backward(create_graph) runs it recorded, so its gradients can be differentiated again. The
/// result has result_dtype(inputs) and is rounded to it (the store of a float32 op).
Tensor record(std::string op, Array value, std::vector<Tensor> inputs, Backward backward,
              std::vector<SavedInfo> saved = {});
/// The form for a fused op with a hand-written kernel backward (nn/functional): a first-order
/// backward runs `kernel` on plain arrays, and create_graph runs `backward` (usually
/// through_composed, the op's composed twin). Without `backward`, create_graph joins the
/// kernel's gradients to the graph as nodes that refuse a second differentiation.
Tensor record(std::string op, Array value, std::vector<Tensor> inputs, KernelBackward kernel,
              std::vector<SavedInfo> saved = {}, Backward backward = nullptr);
namespace detail {
template <class T>
Tensor record_stored(std::string op, xt::xarray<T> value, std::vector<Tensor> inputs, KernelBackward kernel,
                     std::vector<SavedInfo> saved, Backward backward);
template <class V>
using IfNarrowArray =
    std::enable_if_t<std::is_same_v<std::decay_t<V>, FloatArray> || std::is_same_v<std::decay_t<V>, BFloat16Array>, int>;
}  // namespace detail
/// record() for a native kernel's result in a narrower storage type (FloatArray, BFloat16Array),
/// converted when the result dtype is another. Its kernel backward reads the gradient through
/// GradContext::grad_values<T>() (see Node::native). A template only so that an xtensor
/// expression given to record() still means the Array forms above.
template <class V, detail::IfNarrowArray<V> = 0>
Tensor record(std::string op, V&& value, std::vector<Tensor> inputs, KernelBackward kernel,
              std::vector<SavedInfo> saved = {}, Backward backward = nullptr) {
    return detail::record_stored(std::move(op), std::decay_t<V>(std::forward<V>(value)), std::move(inputs), std::move(kernel),
                                 std::move(saved), std::move(backward));
}
/// record() of a narrower result whose backward is written in Tensor ops.
template <class V, detail::IfNarrowArray<V> = 0>
Tensor record(std::string op, V&& value, std::vector<Tensor> inputs, Backward backward, std::vector<SavedInfo> saved = {}) {
    return detail::record_stored(std::move(op), std::decay_t<V>(std::forward<V>(value)), std::move(inputs), nullptr,
                                 std::move(saved), std::move(backward));
}

/// Options of xg::grad (torch.autograd.grad's).
struct GradOptions {
    bool retain_graph = false; ///< keep the graph's closures for another backward
    /// Build a differentiable graph of the gradients (implies retain_graph, as PyTorch's default).
    bool create_graph = false;
    /// An input no output depends on gets an undefined Tensor instead of an error.
    bool allow_unused = false;
};

/// The gradients of the sum of `outputs` (each weighted by its `grad_outputs` entry; seed 1 for
/// one-element outputs when grad_outputs is empty) with respect to `inputs`, as tensors, like
/// torch.autograd.grad: no .grad is touched. Throws xg::Error naming the input when an input is
/// unused (unless allow_unused) or needs no gradient.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, const GradOptions& options = {});

extern template const Array& Tensor::values<double>() const;
extern template const FloatArray& Tensor::values<float>() const;
extern template Array& Tensor::mutable_values<double>();
extern template FloatArray& Tensor::mutable_values<float>();
extern template const Array& Tensor::grad_values<double>() const;
extern template const FloatArray& Tensor::grad_values<float>() const;
extern template Array& Tensor::mutable_grad_values<double>();
extern template FloatArray& Tensor::mutable_grad_values<float>();

/// Number of graph nodes alive in the process (for leak tests).
std::size_t live_node_count();

// ---- creation -----------------------------------------------------------------------------

/// An Array of `shape` with unspecified contents, for an output that a kernel writes in full.
/// Large ones (32 MiB and more, which glibc maps fresh from the system on every allocation) are
/// backed by 2 MiB transparent huge pages where Linux allows it: one page fault per 2 MiB on
/// first touch instead of one per 4 KiB.
Array empty_array(const Shape& shape);
/// empty_array() of a's shape.
Array empty_like(const Array& a);
/// a's values rounded once to storage type T (nearest, ties to even; beyond T's range +-inf);
/// a copy for T = double.
template <class T>
xt::xarray<T> round_to_storage(const Array& a);
/// a's values rounded to float32.
inline FloatArray to_float32_array(const Array& a) { return round_to_storage<float>(a); }
/// f's values as float64 (exact for every storage type).
template <class T>
Array to_float64_array(const xt::xarray<T>& f);

/// f(values) with a's values in their own storage (const xt::xarray<T>&, T the storage type of a's
/// dtype: double, float or xg::bfloat16): an op written once as a template on its storage type
/// runs natively in every dtype, and no float64 mirror of a narrower tensor is made. Storage is
/// chosen by dtype in one place, with_storage_type (core/engine/dtype.hpp).
template <class F>
decltype(auto) on_storage(const Tensor& a, F&& f) {
    return with_storage_type(a.dtype(), [&](auto storage) -> decltype(auto) {
        return f(a.values<typename decltype(storage)::type>());
    });
}
/// f(values of a, values of b) for an op on two tensors: in their own storage when their dtypes
/// are equal; when they differ, each narrower one is widened into a temporary float64 copy (kept
/// for this call only) and f computes in float64 (record() then rounds to result_dtype()).
template <class F>
decltype(auto) on_storage(const Tensor& a, const Tensor& b, F&& f) {
    if (a.dtype() == b.dtype()) {
        return with_storage_type(a.dtype(), [&](auto storage) -> decltype(auto) {
            using T = typename decltype(storage)::type;
            return f(a.values<T>(), b.values<T>());
        });
    }
    const auto widened = [](const Tensor& t) {
        return with_storage_type(t.dtype(), [&](auto storage) { return to_float64_array(t.values<typename decltype(storage)::type>()); });
    };
    const Array wide_a = a.dtype() == Dtype::Float64 ? Array() : widened(a);
    const Array wide_b = b.dtype() == Dtype::Float64 ? Array() : widened(b);
    return f(a.dtype() == Dtype::Float64 ? a.values<double>() : wide_a, b.dtype() == Dtype::Float64 ? b.values<double>() : wide_b);
}

/// A leaf of zeros of `shape`.
Tensor zeros(const Shape& shape, bool requires_grad = false);
/// A leaf of zeros of `shape` and `dtype`.
Tensor zeros(const Shape& shape, Dtype dtype, bool requires_grad = false);
/// A leaf of ones of `shape`.
Tensor ones(const Shape& shape, bool requires_grad = false);
/// A leaf of ones of `shape` and `dtype`.
Tensor ones(const Shape& shape, Dtype dtype, bool requires_grad = false);
/// A leaf of `shape` filled with `fill`.
Tensor full(const Shape& shape, double fill, bool requires_grad = false);
/// A leaf of `shape` and `dtype` filled with `fill` (rounded to dtype).
Tensor full(const Shape& shape, double fill, Dtype dtype, bool requires_grad = false);
/// Zeros of t's shape and dtype (no gradient).
Tensor zeros_like(const Tensor& t);
/// Ones of t's shape and dtype (no gradient).
Tensor ones_like(const Tensor& t);
/// 0, 1, ..., end-1 (default dtype).
Tensor arange(double end);
/// start, start+step, ... below end (default dtype).
Tensor arange(double start, double end, double step = 1.0);
/// start, start+step, ... below end, in `dtype`.
Tensor arange(double start, double end, double step, Dtype dtype);
/// A 0-D leaf holding `value` (default dtype).
Tensor scalar(double value, bool requires_grad = false);
/// A 0-D leaf holding `value` rounded to `dtype`.
Tensor scalar(double value, Dtype dtype, bool requires_grad = false);

}  // namespace xg
