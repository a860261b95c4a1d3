#include "core/engine/tensor.hpp"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "core/engine/memory.hpp"
// add, for the create_graph walk's differentiable sum of gradient parts: the one include in core/
// that points up a layer (docs/architecture.md, "Layers inside core/ and nn/").
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

}  // namespace

template <class T>
xt::xarray<T> round_to_storage(const Array& a) {
    xt::xarray<T> f = xt::xarray<T>::from_shape(a.shape());
    const double* src = a.data();
    T* dst = f.data();
    // a double-to-float conversion rounds to nearest even in the default floating-point
    // environment; bfloat16's constructor rounds once from double (core/engine/bfloat16.hpp)
#pragma omp simd
    for (std::size_t i = 0; i < a.size(); ++i) dst[i] = static_cast<T>(src[i]);
    return f;
}

template <class T>
Array to_float64_array(const xt::xarray<T>& f) {
    Array a = Array::from_shape(f.shape());
    const T* src = f.data();
    double* dst = a.data();
#pragma omp simd
    for (std::size_t i = 0; i < f.size(); ++i) dst[i] = static_cast<double>(src[i]);
    return a;
}

#define XG_STORAGE_CONVERSIONS(T)                                  \
    template xt::xarray<T> round_to_storage<T>(const Array& a);   \
    template Array to_float64_array<T>(const xt::xarray<T>& f);
XG_FOR_EACH_STORAGE_TYPE(XG_STORAGE_CONVERSIONS)
#undef XG_STORAGE_CONVERSIONS

namespace {

// `mirror` set to f's values widened, in its own buffer when the shape allows (a reference
// handed out earlier keeps seeing the tensor).
template <class T>
void widen_into(const xt::xarray<T>& f, Array& mirror) {
    if (mirror.shape() != f.shape()) {
        mirror = to_float64_array(f);
        return;
    }
    const T* src = f.data();
    double* dst = mirror.data();
#pragma omp simd
    for (std::size_t i = 0; i < f.size(); ++i) dst[i] = static_cast<double>(src[i]);
}
void widen_into(const NarrowArray& stored, Array& mirror) {
    std::visit([&](const auto& f) { widen_into(f, mirror); }, stored);
}

// A written float64 mirror rounded into the node's storage; the mirror then holds the stored
// values again (the rounding a store of that dtype makes).
void settle_mirror(Array& mirror, NarrowArray& stored) {
    std::visit(
        [&](auto& f) {
            using T = typename std::decay_t<decltype(f)>::value_type;
            if (f.shape() != mirror.shape()) f.resize(mirror.shape());
            double* m = mirror.data();
            T* out = f.data();
#pragma omp simd
            for (std::size_t i = 0; i < mirror.size(); ++i) {
                out[i] = static_cast<T>(m[i]);
                m[i] = static_cast<double>(out[i]);
            }
        },
        stored);
}

// `values` rounded into the storage of dtype `dtype` (narrower than float64).
NarrowArray rounded_storage(const Array& values, Dtype dtype) {
    return with_storage_type(dtype, [&](auto storage) -> NarrowArray {
        using T = typename decltype(storage)::type;
        if constexpr (std::is_same_v<T, double>) {
            return FloatArray::from_shape({0});  // not reached: float64 is not narrow
        } else {
            return round_to_storage<T>(values);
        }
    });
}

// A narrower node's writes through its float64 mirrors, rounded into its storage.
void settle(Node& n) {
    if (n.value_mirror == Node::Mirror::Written) {
        settle_mirror(n.value, n.narrow_value);
        n.value_mirror = Node::Mirror::Clean;
    }
    if (n.grad_mirror == Node::Mirror::Written) {
        if (n.grad) {
            if (!n.narrow_grad) n.narrow_grad = rounded_storage(Array::from_shape({0}), n.dtype);
            settle_mirror(*n.grad, *n.narrow_grad);
        }
        n.grad_mirror = n.grad ? Node::Mirror::Clean : Node::Mirror::None;
    }
}

Array widened(const NarrowArray& stored) {
    return std::visit([](const auto& f) { return to_float64_array(f); }, stored);
}

// n's values as float64: its storage, or a narrower node's mirror (made once, kept with the node).
Array& float64_values(Node& n) {
    if (n.dtype == Dtype::Float64) return n.value;
    settle(n);
    if (n.value_mirror == Node::Mirror::None) n.value = widened(n.narrow_value);
    if (n.value_mirror == Node::Mirror::Stale) widen_into(n.narrow_value, n.value);
    n.value_mirror = Node::Mirror::Clean;
    return n.value;
}

// n's gradient as float64 (it must have one), as float64_values.
Array& float64_grad(Node& n) {
    if (n.dtype == Dtype::Float64) return *n.grad;
    settle(n);
    if (n.grad_mirror == Node::Mirror::None || !n.grad) n.grad = widened(*n.narrow_grad);
    if (n.grad_mirror == Node::Mirror::Stale) widen_into(*n.narrow_grad, *n.grad);
    n.grad_mirror = Node::Mirror::Clean;
    return *n.grad;
}

// Stores `values` in node n of dtype n.dtype (rounded once when n's storage type is narrower),
// dropping what it held.
template <class T>
void store(Node& n, xt::xarray<T> values) {
    if (n.dtype == Dtype::Float64) {
        if constexpr (std::is_same_v<T, double>) n.value = std::move(values);
        else n.value = to_float64_array(values);
        return;
    }
    if constexpr (!std::is_same_v<T, double>) {
        if (n.dtype == dtype_of<T>()) n.narrow_value = std::move(values);
        else n.narrow_value = rounded_storage(to_float64_array(values), n.dtype);
    } else {
        n.narrow_value = rounded_storage(values, n.dtype);
    }
    n.value = Array::from_shape({0});  // nothing (a default xarray is a 0-D one-element array)
    n.value_mirror = Node::Mirror::None;
}

// Converts n's value and gradient to `dtype` (rounded once when narrowing).
void convert_storage(Node& n, Dtype dtype) {
    if (n.dtype == dtype) return;
    settle(n);
    Array value = float64_values(n);
    std::optional<Array> grad;
    if (n.has_grad()) grad = float64_grad(n);
    n.dtype = dtype;
    n.value_mirror = n.grad_mirror = Node::Mirror::None;
    n.grad.reset();
    n.narrow_grad.reset();
    if (dtype == Dtype::Float64) {
        n.value = std::move(value);
        n.grad = std::move(grad);
        n.narrow_value = FloatArray::from_shape({0});
        return;
    }
    n.narrow_value = rounded_storage(value, dtype);
    if (grad) n.narrow_grad = rounded_storage(*grad, dtype);
    n.value = Array::from_shape({0});
}

std::string shape_text(const Node& n) {
    return shape_str(Shape(n.dims().begin(), n.dims().end()));
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

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
    const std::size_t n = std::max(a.size(), b.size());
    Shape out(n);
    for (std::size_t i = 0; i < n; ++i) {
        const std::size_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
        const std::size_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
        if (da != db && da != 1 && db != 1) {
            fail(op, fmt::format("shapes {} and {} cannot be broadcast together (axis {}: {} vs {})", shape_str(a),
                                 shape_str(b), i, da, db));
        }
        out[i] = da == 1 ? db : da;
    }
    return out;
}

void fail(const std::string& op, const std::string& message) { throw Error(op + ": " + message); }

namespace {

// "a leaf of shape (3,)" / "the output of 'exp', shape (2, 2)": how an error names a tensor.
std::string describe(const Node& n) {
    return n.is_leaf() ? "a leaf of shape " + shape_text(n) : fmt::format("the output of '{}', shape {}", n.op, shape_text(n));
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
        modified_in_place(node_, fmt::format("the output of '{}' (shape {})", node_.op, shape_text(node_)));
    }
    return float64_values(node_);
}

const Array& GradContext::input(std::size_t i) const {
    Node& p = *node_.parents[i];
    if (p.version > node_.recorded_at) modified_in_place(node_, fmt::format("input {} of '{}' ({})", i, node_.op, describe(p)));
    return float64_values(p);
}

namespace {
[[noreturn]] void not_of_storage(const Node& node, const std::string& which, Dtype is, Dtype wanted) {
    fail("backward of '" + node.op + "'",
         fmt::format("{} is {}; a kernel on {} storage (grad_values/output_values/input_values) needs a {} tensor", which,
                     dtype_name(is), dtype_name(wanted), dtype_name(wanted)));
}
}  // namespace

template <class T>
const xt::xarray<T>& GradContext::grad_values() const {
    if constexpr (std::is_same_v<T, double>) {
        return grad;
    } else {
        if (native_grad_ == nullptr || native_grad_->dtype() != dtype_of<T>()) {
            not_of_storage(node_, "the gradient", native_grad_ ? native_grad_->dtype() : Dtype::Float64, dtype_of<T>());
        }
        return native_grad_->values<T>();
    }
}

template <class T>
const xt::xarray<T>& GradContext::output_values() const {
    if constexpr (std::is_same_v<T, double>) {
        return output();
    } else {
        if (node_.dtype != dtype_of<T>()) not_of_storage(node_, "the output", node_.dtype, dtype_of<T>());
        if (node_.version > node_.recorded_at) {
            modified_in_place(node_, fmt::format("the output of '{}' (shape {})", node_.op, shape_text(node_)));
        }
        settle(node_);
        return std::get<xt::xarray<T>>(node_.narrow_value);
    }
}

template <class T>
const xt::xarray<T>& GradContext::input_values(std::size_t i) const {
    if constexpr (std::is_same_v<T, double>) {
        return input(i);
    } else {
        Node& p = *node_.parents[i];
        if (p.dtype != dtype_of<T>()) not_of_storage(node_, fmt::format("input {}", i), p.dtype, dtype_of<T>());
        if (p.version > node_.recorded_at) modified_in_place(node_, fmt::format("input {} of '{}' ({})", i, node_.op, describe(p)));
        settle(p);
        return std::get<xt::xarray<T>>(p.narrow_value);
    }
}

#define XG_GRAD_CONTEXT_VIEWS(T)                                                       \
    template const xt::xarray<T>& GradContext::grad_values<T>() const;               \
    template const xt::xarray<T>& GradContext::output_values<T>() const;             \
    template const xt::xarray<T>& GradContext::input_values<T>(std::size_t i) const;
XG_FOR_EACH_STORAGE_TYPE(XG_GRAD_CONTEXT_VIEWS)
#undef XG_GRAD_CONTEXT_VIEWS

Shape GradContext::input_shape(std::size_t i) const {
    const auto& s = node_.parents[i]->dims();
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
    if (inserted) slot->second = xt::zeros<double>(p->dims());
    return slot->second;
}

template <class T>
xt::xarray<T>& GradPart::values() {
    if (auto* v = std::get_if<xt::xarray<T>>(&values_)) return *v;
    fail("GradPart", fmt::format("asked for {} values; it holds {}", dtype_name(dtype_of<T>()),
                                 values_.index() == 0 ? "no gradient" : "values of another storage type"));
}

template <class T>
xt::xarray<T> GradPart::take_as() {
    if (auto* v = std::get_if<xt::xarray<T>>(&values_)) return std::move(*v);
    if (values_.index() == 0) fail("GradPart", "holds no gradient");
    return round_to_storage<T>(to_float64());
}

// f(values) for the array a GradPart holds, `none` when it holds none.
template <class R, class Variant, class F>
R visit_held(const Variant& held, R none, F&& f) {
    return std::visit(
        [&](const auto& v) -> R {
            if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::monostate>) {
                return none;
            } else {
                return f(v);
            }
        },
        held);
}

Array GradPart::to_float64() const {
    return visit_held(values_, Array(), [](const auto& v) { return to_float64_array(v); });
}

Shape GradPart::shape() const {
    return visit_held(values_, Shape(), [](const auto& v) { return Shape(v.shape().begin(), v.shape().end()); });
}

#define XG_GRAD_PART_VALUES(T)                       \
    template xt::xarray<T>& GradPart::values<T>();   \
    template xt::xarray<T> GradPart::take_as<T>();
XG_FOR_EACH_STORAGE_TYPE(XG_GRAD_PART_VALUES)
#undef XG_GRAD_PART_VALUES

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
    node_->dtype = dtype;
    store<double>(*node_, std::move(value));
    node_->requires_grad = requires_grad;
}
Tensor::Tensor(std::initializer_list<ListElement> v) : node_(new_node()) {
    Array a = Array::from_shape({v.size()});
    std::size_t i = 0;
    for (const ListElement& e : v) a.data()[i++] = e.value;
    node_->dtype = default_dtype();
    store<double>(*node_, std::move(a));
}
Tensor::Tensor(xt::nested_initializer_list_t<double, 2> v) : Tensor(Array(v)) {}
Tensor::Tensor(xt::nested_initializer_list_t<double, 3> v) : Tensor(Array(v)) {}
Tensor::Tensor(xt::nested_initializer_list_t<double, 4> v) : Tensor(Array(v)) {}

template <class T>
Tensor Tensor::from_values(xt::xarray<T> values, bool requires_grad) {
    Tensor t(new_node());
    t.node_->dtype = dtype_of<T>();
    store(*t.node_, std::move(values));
    t.node_->requires_grad = requires_grad;
    return t;
}

static const Node& checked(const NodePtr& n) {
    if (!n) throw Error("Tensor: use of an undefined tensor (default-constructed)");
    return *n;
}

namespace {
std::uint64_t next_version() { return g_clock.fetch_add(1, std::memory_order_relaxed) + 1; }

void check_storage(const Node& n, Dtype wanted, const char* what) {
    if (n.dtype != wanted) {
        fail(what, fmt::format("asked for {} storage of a {} tensor of shape {} (use value() for float64 values of any "
                               "dtype, or to({}))", dtype_name(wanted), dtype_name(n.dtype), shape_text(n), dtype_name(wanted)));
    }
}

// The native gradient of n, of storage type T (n's; narrower nodes: after the mirror's writes
// are settled), or null when n has none.
template <class T>
xt::xarray<T>* native_grad(Node& n) {
    if constexpr (std::is_same_v<T, double>) {
        return n.grad ? &*n.grad : nullptr;
    } else {
        settle(n);
        return n.narrow_grad ? &std::get<xt::xarray<T>>(*n.narrow_grad) : nullptr;
    }
}
}  // namespace

const Array& Tensor::value() const {
    checked(node_);
    return float64_values(*node_);
}
Array& Tensor::mutable_value() {
    checked(node_);
    node_->version = next_version();
    Array& v = float64_values(*node_);  // the writer reads what it updates (x = 0.9 x + ...)
    if (node_->dtype != Dtype::Float64) node_->value_mirror = Node::Mirror::Written;
    return v;
}

template <class T>
const xt::xarray<T>& Tensor::values() const {
    check_storage(checked(node_), dtype_of<T>(), "values");
    if constexpr (std::is_same_v<T, double>) {
        return node_->value;
    } else {
        settle(*node_);
        return std::get<xt::xarray<T>>(node_->narrow_value);
    }
}

template <class T>
xt::xarray<T>& Tensor::mutable_values() {
    check_storage(checked(node_), dtype_of<T>(), "mutable_values");
    node_->version = next_version();
    if constexpr (std::is_same_v<T, double>) {
        return node_->value;
    } else {
        settle(*node_);
        if (node_->value_mirror != Node::Mirror::None) node_->value_mirror = Node::Mirror::Stale;
        return std::get<xt::xarray<T>>(node_->narrow_value);
    }
}

template <class T>
const xt::xarray<T>& Tensor::grad_values() const {
    check_storage(checked(node_), dtype_of<T>(), "grad_values");
    const auto* g = native_grad<T>(*node_);
    if (!g) fail("grad", "this tensor has no gradient (did backward() reach it?)");
    return *g;
}

template <class T>
xt::xarray<T>& Tensor::mutable_grad_values() {
    check_storage(checked(node_), dtype_of<T>(), "mutable_grad_values");
    auto* g = native_grad<T>(*node_);
    if (!g) fail("grad", "this tensor has no gradient (did backward() reach it?)");
    node_->grad_graph.reset();  // changed outside the graph: grad() is a plain leaf again
    if constexpr (!std::is_same_v<T, double>) {
        if (node_->grad_mirror != Node::Mirror::None) node_->grad_mirror = Node::Mirror::Stale;
    }
    return *g;
}

#define XG_TENSOR_STORAGE(T)                                                             \
    template Tensor Tensor::from_values<T>(xt::xarray<T> values, bool requires_grad);   \
    template const xt::xarray<T>& Tensor::values<T>() const;                            \
    template xt::xarray<T>& Tensor::mutable_values<T>();                                \
    template const xt::xarray<T>& Tensor::grad_values<T>() const;                       \
    template xt::xarray<T>& Tensor::mutable_grad_values<T>();
XG_FOR_EACH_STORAGE_TYPE(XG_TENSOR_STORAGE)
#undef XG_TENSOR_STORAGE

Dtype Tensor::dtype() const { return checked(node_).dtype; }
// Shapes are read without settling a float32 node's pending writes: a writer may ask for the
// size between taking the storage and writing it (double* p = t.data(); for (i < t.numel()) ...).
Shape Tensor::shape() const {
    const auto& s = checked(node_).dims();
    return Shape(s.begin(), s.end());
}
std::size_t Tensor::numel() const {
    const auto& s = checked(node_).dims();
    std::size_t n = 1;
    for (std::size_t e : s) n *= e;
    return n;
}
std::size_t Tensor::size(std::int64_t axis) const {
    const auto& s = checked(node_).dims();
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
bool Tensor::has_grad() const { return checked(node_).has_grad(); }
Tensor Tensor::grad() const {
    if (!has_grad()) return Tensor();
    if (node_->grad_graph) return Tensor(node_->grad_graph);  // from backward(create_graph): differentiable
    return with_storage_type(node_->dtype, [&](auto storage) { return from_values(*native_grad<typename decltype(storage)::type>(*node_)); });
}
const Array& Tensor::grad_value() const {
    if (!has_grad()) fail("grad", "this tensor has no gradient (did backward() reach it?)");
    return float64_grad(*node_);
}
Array& Tensor::mutable_grad() {
    if (!has_grad()) fail("grad", "this tensor has no gradient (did backward() reach it?)");
    node_->grad_graph.reset();  // changed outside the graph: grad() is a plain leaf again
    Array& g = float64_grad(*node_);
    if (node_->dtype != Dtype::Float64) node_->grad_mirror = Node::Mirror::Written;
    return g;
}
void Tensor::set_grad(const Array& g) {
    checked(node_);
    if (g.shape() != node_->dims()) {
        fail("set_grad", fmt::format("gradient of shape {} for a tensor of shape {}",
                                     shape_str(Shape(g.shape().begin(), g.shape().end())), shape_text(*node_)));
    }
    node_->grad_graph.reset();
    if (node_->dtype != Dtype::Float64) {
        node_->narrow_grad = rounded_storage(g, node_->dtype);
        node_->grad.reset();
        node_->grad_mirror = Node::Mirror::None;
    } else {
        node_->grad = g;
    }
}
void Tensor::zero_grad() {
    checked(node_);
    node_->grad.reset();
    node_->narrow_grad.reset();
    node_->grad_mirror = Node::Mirror::None;
    node_->grad_graph.reset();
}
void Tensor::retain_grad() { checked(node_), node_->retains_grad = true; }

Tensor Tensor::detach() const {
    return with_storage_type(checked(node_).dtype, [&](auto storage) { return from_values(values<typename decltype(storage)::type>()); });
}

void Tensor::convert_in_place(Dtype dtype) {
    if (!checked(node_).is_leaf()) {
        fail("to", fmt::format("can convert only a leaf in place; this tensor was made by '{}' (use to(dtype), which copies)", node_->op));
    }
    if (node_->dtype == dtype) return;
    node_->version = next_version();
    convert_storage(*node_, dtype);
}

Tensor Tensor::to(Dtype dtype) const {
    const Dtype from = checked(node_).dtype;
    if (from == dtype) return *this;
    // d to(a)/da = 1: the gradient goes back converted to a's dtype
    Backward back = [from](const BackwardContext& c) -> std::vector<Tensor> { return {c.grad.to(from)}; };
    Tensor out = with_storage_type(from, [&](auto storage) {
        using T = typename decltype(storage)::type;
        if constexpr (std::is_same_v<T, double>) {
            return record("to", Array(value()), {*this}, std::move(back));
        } else {
            return record("to", xt::xarray<T>(values<T>()), {*this}, std::move(back));
        }
    });
    convert_storage(*out.node_, dtype);
    return out;
}

// A handle that erases entry `id` of node->*list, if the node is still alive.
template <class Hook>
RemovableHandle removal_of(const NodePtr& node, std::vector<std::pair<std::uint64_t, Hook>> Node::*list, std::uint64_t id) {
    return RemovableHandle([weak = std::weak_ptr<Node>(node), list, id] {
        if (NodePtr alive = weak.lock()) {
            auto& hooks = (*alive).*list;
            for (auto it = hooks.begin(); it != hooks.end(); ++it) {
                if (it->first == id) {
                    hooks.erase(it);
                    break;
                }
            }
        }
    });
}

RemovableHandle Tensor::register_post_accumulate_grad_hook(PostAccumulateGradHook hook) const {
    const Node& n = checked(node_);
    if (!n.requires_grad || !n.is_leaf()) {
        fail("register_post_accumulate_grad_hook", "needs a leaf that requires grad, got " + describe(n));
    }
    if (!hook) fail("register_post_accumulate_grad_hook", "the hook is empty");
    const std::uint64_t id = g_hook_ids.fetch_add(1, std::memory_order_relaxed) + 1;
    node_->post_accumulate_hooks.emplace_back(id, std::move(hook));
    return removal_of(node_, &Node::post_accumulate_hooks, id);
}

RemovableHandle Tensor::register_hook(GradHook hook) const {
    const Node& n = checked(node_);
    if (!n.requires_grad) {
        fail("register_hook", "cannot register a hook on a tensor that does not require grad (" + describe(n) + ")");
    }
    if (!hook) fail("register_hook", "the hook is empty");
    const std::uint64_t id = g_hook_ids.fetch_add(1, std::memory_order_relaxed) + 1;
    node_->hooks.emplace_back(id, std::move(hook));
    return removal_of(node_, &Node::hooks, id);
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
                                       shape_text(input)));
}

// The gradient after node's hooks, in registration order; a defined result replaces it.
Tensor run_hooks(const Node& node, Tensor g) {
    const auto hooks = node.hooks;  // a copy: a hook may remove itself or another while running
    for (const auto& entry : hooks) {
        Tensor replaced = entry.second(g);
        if (!replaced.defined()) continue;
        if (replaced.shape() != g.shape()) {
            fail("register_hook", fmt::format("a hook on {} returned a gradient of shape {}; it must keep the shape {}",
                                              describe(node), shape_str(replaced.shape()), shape_str(g.shape())));
        }
        g = std::move(replaced);
    }
    return g;
}

// A part of a gradient as an array of storage type T: moved out of its node when nothing else
// holds it (a result the backward just computed), copied when it is shared (the seed, an input,
// the incoming gradient passed through), converted when it is of another dtype.
template <class T>
xt::xarray<T> take_values(Tensor&& t) {
    if (t.dtype() != dtype_of<T>()) return round_to_storage<T>(t.value());
    if (t.node().use_count() == 1) {
        Node& n = *t.node();
        if constexpr (std::is_same_v<T, double>) {
            return std::move(n.value);
        } else {
            settle(n);
            return std::move(std::get<xt::xarray<T>>(n.narrow_value));
        }
    }
    return t.values<T>();
}

// dst += src, element by element (same shape), in T's arithmetic type: a narrower sum rounds each
// add, as PyTorch's.
template <class T>
void add_into(xt::xarray<T>& dst, const xt::xarray<T>& src) {
    using A = ArithmeticOf<T>;
    T* d = dst.data();
    const T* s = src.data();
#pragma omp simd
    for (std::size_t k = 0; k < dst.size(); ++k) d[k] = static_cast<T>(static_cast<A>(d[k]) + static_cast<A>(s[k]));
}

// dst += src for the narrower storage held in dst (src of the same storage type).
template <class T>
void add_into(NarrowArray& dst, const xt::xarray<T>& src) {
    add_into(std::get<xt::xarray<T>>(dst), src);
}

[[noreturn]] void wrong_grad_shape(const Node& node, const Shape& got, const std::string& from_op) {
    fail(from_op + " backward", fmt::format("produced a gradient of shape {} for an input of shape {}", shape_str(got), shape_text(node)));
}

// Adds g to node's .grad (a leaf, or a retain_grad node), in the node's dtype.
void accumulate(Node& node, Tensor&& g, const std::string& from_op) {
    if (g.shape() != Shape(node.dims().begin(), node.dims().end())) wrong_grad_shape(node, g.shape(), from_op);
    node.grad_graph.reset();
    with_storage_type(node.dtype, [&](auto storage) {
        using T = typename decltype(storage)::type;
        xt::xarray<T> a = take_values<T>(std::move(g));
        if constexpr (std::is_same_v<T, double>) {
            if (!node.grad) node.grad = std::move(a);
            else add_into(*node.grad, a);
        } else {
            settle(node);
            if (!node.narrow_grad) node.narrow_grad = std::move(a);
            else add_into(*node.narrow_grad, a);  // a second backward adds to .grad: a sum in the dtype, as PyTorch's
            if (node.grad_mirror != Node::Mirror::None) node.grad_mirror = Node::Mirror::Stale;
        }
    });
}

// A leaf's post-accumulate hooks, in registration order, once its .grad holds this walk's part.
void run_post_accumulate_hooks(const NodePtr& leaf) {
    if (leaf->post_accumulate_hooks.empty()) return;
    const auto hooks = leaf->post_accumulate_hooks;  // a copy: a hook may remove itself while running
    const Tensor tensor(leaf);
    for (const auto& entry : hooks) entry.second(tensor);
}

// The walk's gradients of the nodes it has not reached yet, each in its node's dtype: float64
// nodes' in `f64`, narrower nodes' in `narrow` (plus, in `f64`, what a kernel added in place
// through GradContext::accumulated, merged when the walk reaches the node).
struct PendingGrads {
    std::unordered_map<Node*, Array> f64;
    std::unordered_map<Node*, NarrowArray> narrow;

    // Adds a part of input p's gradient (converted to p's dtype; a narrower sum rounds each add).
    void add(Node* p, GradPart&& part) {
        with_storage_type(p->dtype, [&](auto storage) {
            using T = typename decltype(storage)::type;
            xt::xarray<T> a = part.take_as<T>();
            if constexpr (std::is_same_v<T, double>) {
                auto [slot, inserted] = f64.try_emplace(p);
                if (inserted) slot->second = std::move(a);
                else add_into(slot->second, a);
            } else {
                auto found = narrow.find(p);
                if (found == narrow.end()) narrow.emplace(p, std::move(a));
                else add_into(found->second, a);
            }
        });
    }
    void add(Node* p, Tensor&& part) {
        with_storage_type(p->dtype, [&](auto storage) { add(p, GradPart(take_values<typename decltype(storage)::type>(std::move(part)))); });
    }
    // Node n's summed gradient as a tensor of its dtype, taken out; undefined when none reached it.
    Tensor take(Node* n) {
        auto found = f64.find(n);
        if (n->dtype == Dtype::Float64) {
            if (found == f64.end()) return Tensor();
            Tensor g(std::move(found->second), Dtype::Float64);
            f64.erase(found);
            return g;
        }
        if (found != f64.end()) {  // parts a kernel added in place
            add(n, GradPart(std::move(found->second)));
            f64.erase(found);
        }
        auto stored = narrow.find(n);
        if (stored == narrow.end()) return Tensor();
        Tensor g = std::visit([](auto& v) { return Tensor::from_values(std::move(v)); }, stored->second);
        narrow.erase(stored);
        return g;
    }
};

// A fused op's kernel backward run on the incoming gradient g: a native node given g in its own
// dtype reads g's storage only (no float64 view of g is made); any other node reads float64
// values. `pending` collects what the kernel adds through GradContext::accumulated().
Grads run_kernel(Node& node, const Tensor& g, std::unordered_map<Node*, Array>* pending) {
    static const Array kNoFloat64Grad;
    const bool native = node.native && g.dtype() == node.dtype;
    const Tensor* stored = g.dtype() != Dtype::Float64 ? &g : nullptr;
    return node.kernel(GradContext(native ? kNoFloat64Grad : g.value(), node, pending, stored));
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

// The first-order walk: gradients are summed as plain arrays, and each node's backward runs
// with recording off, so its ops compute values and make no nodes. A root's seed is used as the
// caller's tensor, never copied; every other gradient is owned by `pending` and moved into the
// leaf it ends in.
void run_backward(const std::vector<NodePtr>& roots, const std::vector<Tensor>& seeds, bool retain_graph,
                  Targets* targets, std::vector<Tensor>* captured) {
    const std::vector<const NodePtr*> order = topological_order(roots);
    if (targets) targets->find_leads(order);
    std::unordered_map<Node*, const Tensor*> seed_of;
    for (std::size_t i = 0; i < roots.size(); ++i) {
        auto [slot, inserted] = seed_of.try_emplace(roots[i].get(), &seeds[i]);
        if (!inserted) fail("grad", "the same output is given twice; pass it once");
    }
    // Gradients of non-leaves live only during this walk unless retain_grad() was called.
    PendingGrads pending;
    NoGradGuard no_grad;  // backwards compute values; nothing they do is recorded
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
        const NodePtr& self = **it;
        Node* node = self.get();
        const auto seed = seed_of.find(node);
        Tensor g = pending.take(node);
        const bool summed = g.defined();  // else g is the caller's seed
        if (summed) {
            if (seed != seed_of.end()) {  // a root that is also an input of another root
                pending.add(node, Tensor(*seed->second).detach());
                pending.add(node, std::move(g));
                g = pending.take(node);
            }
        } else if (seed != seed_of.end()) {
            g = *seed->second;
        } else {
            continue;  // no gradient reached this node
        }
        if (!node->hooks.empty()) g = run_hooks(*node, summed ? std::move(g) : g.detach());  // a hook gets its own copy of a seed
        if (g_anomaly_mode) check_finite(g.value(), "backward into '" + node->op + "'");
        if (targets) {
            auto target = targets->positions.find(node);
            if (target != targets->positions.end()) {
                for (std::size_t k : target->second) (*captured)[k] = g.detach();
            }
            if (node->is_leaf() || !targets->leads.count(node)) continue;
        } else {
            if (node->is_leaf()) {
                accumulate(*node, summed ? std::move(g) : g.detach(), node->op);  // a leaf is the end of the line
                run_post_accumulate_hooks(self);
                continue;
            }
            if (node->retains_grad) accumulate(*node, g.detach(), node->op);
        }
        check_not_freed(*node);
        if (node->kernel) {  // a fused op's hand-written kernel, on plain arrays
            Grads grads = run_kernel(*node, g, &pending.f64);
            for (std::size_t i = 0; i < node->parents.size() && i < grads.size(); ++i) {
                Node* p = node->parents[i].get();
                if (!p->requires_grad || !grads[i]) continue;
                if (grads[i].shape() != Shape(p->dims().begin(), p->dims().end())) wrong_shape(node->op, i, grads[i].shape(), *p);
                if (g_anomaly_mode) {
                    check_finite(grads[i].to_float64(), "backward of '" + node->op + "'");
                }
                pending.add(p, std::move(grads[i]));
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
                if (grads[i].shape() != Shape(p->dims().begin(), p->dims().end())) wrong_shape(node->op, i, grads[i].shape(), *p);
                if (g_anomaly_mode) check_finite(grads[i].value(), "backward of '" + node->op + "'");
                pending.add(p, std::move(grads[i]));
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
        grads = run_kernel(node, g, &added);
    }
    std::vector<Tensor> deps{g};
    for (const NodePtr& p : node.parents) deps.push_back(Tensor(p));
    const std::string op = node.op;
    std::vector<Tensor> out(node.parents.size());
    for (std::size_t i = 0; i < node.parents.size(); ++i) {
        Node* p = node.parents[i].get();
        if (!p->requires_grad) continue;
        std::optional<Array> part;
        if (i < grads.size() && grads[i]) part = grads[i].take_as<double>();
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
    if (g.shape() != Shape(node.dims().begin(), node.dims().end())) wrong_shape(node.op, 0, g.shape(), node);
    Tensor stored;
    if (node.has_grad() && !node.grad_graph) {
        settle(node);
        stored = node.dtype == Dtype::Float64 ? Tensor(*node.grad, Dtype::Float64)
                                              : std::visit([](const auto& v) { return Tensor::from_values(v); }, *node.narrow_grad);
    }
    const Tensor total = node.grad_graph ? add(Tensor(node.grad_graph), g) : stored.defined() ? add(stored, g) : g;
    with_storage_type(node.dtype, [&](auto storage) {
        using T = typename decltype(storage)::type;
        if constexpr (std::is_same_v<T, double>) {
            node.grad = total.value();
        } else {
            node.narrow_grad = total.dtype() == node.dtype ? total.values<T>() : round_to_storage<T>(total.value());
            if (node.grad_mirror != Node::Mirror::None) node.grad_mirror = Node::Mirror::Stale;
        }
    });
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
                run_post_accumulate_hooks(self);
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
            if (grads[i].shape() != Shape(p->dims().begin(), p->dims().end())) wrong_shape(node->op, i, grads[i].shape(), *p);
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
    if (numel() != 1) {
        fail("backward", fmt::format("grad can be implicitly created only for scalar outputs; this tensor has shape {} - "
                                     "pass a gradient of that shape",
                                     shape_str(shape())));
    }
    backward(Tensor(Array(xt::ones<double>(n.dims())), n.dtype), options);
}

void Tensor::backward(const Tensor& gradient, BackwardOptions options) const {
    checked(node_);
    if (!gradient.defined()) return backward(options);  // libtorch: an undefined gradient means seed 1
    if (gradient.shape() != shape()) {
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
            if (outputs[i].numel() != 1) {
                fail("grad", fmt::format("output {} has shape {}: grad can be implicitly created only for one-element "
                                         "outputs; pass grad_outputs", i, shape_str(outputs[i].shape())));
            }
            seeds.push_back(Tensor(Array(xt::ones<double>(out.dims())), out.dtype));
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
        run_backward(roots, seeds, retain, &targets, &result);
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
        modified_in_place(*node_, fmt::format("the output of '{}' (shape {})", node_->op, shape_text(*node_)));
    }
    return Tensor(node_);
}

Tensor BackwardContext::input(std::size_t i) const {
    const NodePtr& p = node_->parents[i];
    if (p->version > node_->recorded_at) modified_in_place(*node_, fmt::format("input {} of '{}' ({})", i, node_->op, describe(*p)));
    return Tensor(p);
}

Shape BackwardContext::input_shape(std::size_t i) const {
    const auto& s = node_->parents[i]->dims();
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

template <class Values>
Tensor record_node(std::string op, Values value, std::vector<Tensor>& inputs, Backward backward, KernelBackward kernel,
                   std::vector<SavedInfo> saved) {
    if (g_anomaly_mode && !g_in_backward) {
        if constexpr (std::is_same_v<Values, Array>) check_finite(value, "forward of '" + op + "'");
        else check_finite(to_float64_array(value), "forward of '" + op + "'");
    }
    bool needs = false;
    if (g_grad_mode) {
        for (const Tensor& t : inputs) needs = needs || checked(t.node()).requires_grad;
    }
    NodePtr node = new_node();
    node->dtype = result_dtype(inputs);
    node->native = !std::is_same_v<Values, Array> && node->dtype == dtype_of<typename Values::value_type>();
    store(*node, std::move(value));
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
        if (n.dims().size() > 0) {
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

template <class T>
Tensor detail::record_stored(std::string op, xt::xarray<T> value, std::vector<Tensor> inputs, KernelBackward kernel,
                             std::vector<SavedInfo> saved, Backward backward) {
    return record_node(std::move(op), std::move(value), inputs, std::move(backward), std::move(kernel), std::move(saved));
}
template Tensor detail::record_stored<float>(std::string, FloatArray, std::vector<Tensor>, KernelBackward, std::vector<SavedInfo>,
                                             Backward);
template Tensor detail::record_stored<bfloat16>(std::string, BFloat16Array, std::vector<Tensor>, KernelBackward,
                                                std::vector<SavedInfo>, Backward);

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
