// xg::nn::Module: the base of every layer and model, after PyTorch's C++ frontend.
//
// Modules are held by shared handle (`auto net = std::make_shared<Net>();`). A module owns named
// parameters (leaf Tensors with requires_grad), buffers (Tensors that are state but not trained,
// e.g. BatchNorm's running statistics) and child modules, each kept in registration order so
// parameters(), state_dict() and to_string() list things the way PyTorch does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/io/io.hpp"
#include "core/engine/tensor.hpp"

namespace xg::nn {

class Module;

/// `value` as a size, for constructor arguments such as Linear's in_features: throws xg::Error
/// "<op>: <argument> must be positive, got <value>" unless value > 0. Sizes are signed, as in
/// PyTorch, so that Linear(-1, 3) names its argument instead of allocating 2^64 - 1 rows.
std::size_t positive_size(std::int64_t value, const char* op, const char* argument);

/// A module's parameter member (Linear::weight, LayerNorm::bias, ...): a Tensor bound for good to
/// the tensor its module registered, which parameters(), state_dict() and optimizers hold. Reading
/// it is reading that Tensor. Assigning a tensor to it copies the values in, outside the graph
/// (PyTorch: `with torch.no_grad(): lin.weight.copy_(t)`), so an assignment can never leave the
/// optimizer and state_dict holding a tensor the module no longer uses:
///
///     lin.weight = pretrained;  // same shape; the optimizer and state_dict see the new values
///
/// To share one tensor between modules (weight tying) or put another tensor in a parameter's
/// place, call Module::replace_parameter, before creating the optimizer.
class Parameter : public Tensor {
public:
    /// Undefined until its module registers it (for good when the module is built without it,
    /// e.g. the bias of Linear(in, out, false)).
    Parameter() = default;
    /// Another handle to the same registered tensor (e.g. in a container of parameters).
    Parameter(const Parameter&) = default;
    /// Copies `values` (same shape) into the registered tensor, which keeps its requires_grad and
    /// its gradient; throws xg::Error naming the parameter when it is undefined, `values` is, or
    /// the shapes differ.
    Parameter& operator=(const Tensor& values);
    /// Copies values too: `a.weight = b.weight` does not tie them (see Module::replace_parameter).
    Parameter& operator=(const Parameter& values);
    /// The name it is registered under ("weight"); empty before registration.
    const std::string& name() const { return name_; }

private:
    friend class Module;
    std::string name_;
};

/// The element type of a buffer in files. Every value is a floating tensor in memory; a buffer
/// that PyTorch keeps as int64 (BatchNorm's num_batches_tracked) is registered as int64, holds
/// whole numbers, and is written to .npz as int64 so the file matches PyTorch's state_dict.
enum class BufferDtype { floating, int64 };

/// What load_state_dict reports, like PyTorch's (missing_keys, unexpected_keys) result: the
/// module's keys the state lacked and the state's keys the module has no place for. Both are
/// empty after a strict load (which throws otherwise).
struct LoadStateDictResult {
    /// Keys of state_dict() that the loaded state did not have (left unchanged).
    std::vector<std::string> missing_keys;
    /// Keys of the loaded state that this module does not have (ignored).
    std::vector<std::string> unexpected_keys;
};

/// A forward-pre hook (Module::register_forward_pre_hook): sees the module and its input.
using ForwardPreHook = std::function<void(Module& module, const Tensor& input)>;
/// A forward hook (Module::register_forward_hook): sees the module, its input and its output.
using ForwardHook = std::function<void(Module& module, const Tensor& input, const Tensor& output)>;

/// The base of every layer and model: named parameters, buffers and children in registration
/// order, train/eval mode, state_dict save/load and PyTorch-style printing. Registration errors
/// (empty or dotted names, duplicates, undefined or non-leaf parameters) throw xg::Error.
class Module {
public:
    Module() = default;
    virtual ~Module() = default;
    Module(const Module&) = delete;
    Module& operator=(const Module&) = delete;

    /// The one-tensor forward used by Sequential. Modules whose forward takes other arguments
    /// (Embedding indices, attention's q/k/v) may leave it: the default throws naming the module.
    virtual Tensor forward(const Tensor& x);
    /// Calls forward(x) between this module's hooks: forward-pre hooks, forward, forward hooks,
    /// each list in registration order. Sequential and the library's composite modules call
    /// their children this way; calling forward() directly skips the hooks.
    Tensor operator()(const Tensor& x);

    // ---- hooks (fire when the module is called through operator()) ------------------------------

    /// Registers `hook(module, input)`, called before each forward through operator(), e.g. to
    /// record input statistics. It observes only (PyTorch's may also replace the input).
    RemovableHandle register_forward_pre_hook(ForwardPreHook hook);
    /// Registers `hook(module, input, output)`, called after each forward through operator(),
    /// e.g. to record per-layer activation norms. It observes only (PyTorch's may also replace
    /// the output).
    RemovableHandle register_forward_hook(ForwardHook hook);

    // ---- registration (call from subclass constructors) ---------------------------------------

    /// Registers `value` (a leaf) as parameter `name` held by `member`, a Parameter of this module,
    /// and marks it requires_grad: `register_parameter("weight", weight, randn({3, 4}));`. From
    /// then on `member` and the registry hold the same tensor (see Parameter).
    void register_parameter(const std::string& name, Parameter& member, Tensor value, bool requires_grad = true);
    /// Registers a parameter under `name` and marks it requires_grad; returns the same handle (the
    /// PyTorch C++ frontend's form). A plain Tensor member assigned this handle can later be
    /// reassigned and drift from the registry: prefer a Parameter member and the form above.
    Tensor register_parameter(const std::string& name, Tensor tensor, bool requires_grad = true);
    /// Puts `tensor` (a leaf of the same shape) in place of the parameter `name` (dotted names as in
    /// named_parameters() reach into children), in the registry and in its Parameter member, e.g.
    /// to tie weights:
    /// `head->replace_parameter("weight", embedding->weight)`. The new tensor takes over the old
    /// one's requires_grad. Optimizers created before still hold the old tensor, so create them
    /// afterwards (as in PyTorch).
    void replace_parameter(const std::string& name, Tensor tensor);
    /// Registers a buffer (saved in state_dict, never trained); returns the same handle. An
    /// int64 buffer must hold whole numbers and is written to files as int64.
    Tensor register_buffer(const std::string& name, Tensor tensor, BufferDtype dtype = BufferDtype::floating);
    /// Puts `tensor` (same shape) in place of the buffer `name` in the registry (state_dict, to(),
    /// buffers()), e.g. to share another module's running statistics (convert_sync_batchnorm). A
    /// Tensor member holding the old buffer is the caller's to reassign. Throws xg::Error naming
    /// the buffer when there is none of that name or the shapes differ.
    void replace_buffer(const std::string& name, Tensor tensor);
    /// Registers a child module; returns it so it can be stored in a typed member.
    template <class M>
    std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
        add_child(name, module);
        return module;
    }

    /// Puts `module` in place of the child `name` (same position in the registry), e.g. for
    /// convert_sync_batchnorm; throws xg::Error when there is no such child or `module` is null.
    /// A typed member that pointed to the old child still does.
    void replace_module(const std::string& name, std::shared_ptr<Module> module);

    // ---- traversal (registration order, depth first: own entries before children's) ----------

    /// Every parameter (own first, then children's when recurse), in registration order.
    std::vector<Tensor> parameters(bool recurse = true) const;
    /// parameters() with dotted names ("0.weight", "blocks.1.ln.bias").
    std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const;
    /// Every buffer (e.g. running statistics), own first, then children's.
    std::vector<Tensor> buffers(bool recurse = true) const;
    /// buffers() with dotted names.
    std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
    /// The direct children, in registration order.
    std::vector<std::shared_ptr<Module>> children() const;
    /// The direct children with their names.
    const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& named_children() const { return children_; }

    // ---- mode and gradients --------------------------------------------------------------------

    /// Sets training mode on this module and every descendant.
    virtual void train(bool on = true);
    /// train(false): evaluation mode for this module and every descendant.
    void eval() { train(false); }
    /// True in training mode (the default).
    bool is_training() const { return training_; }
    /// Clears the gradient of every parameter.
    void zero_grad();
    /// Converts every parameter, its gradient and every floating buffer (not int64 ones such as
    /// num_batches_tracked) to `dtype` in place, recursively, as torch.nn.Module.to(dtype): an
    /// optimizer made before keeps working on the same tensors. Returns *this.
    Module& to(Dtype dtype);

    // ---- state -----------------------------------------------------------------------------------

    /// Copies of every parameter then buffer value per module, depth first, with dotted names.
    NamedArrays state_dict() const;
    /// Replaces parameter and buffer values from `state`, each converted to the dtype of the
    /// tensor it replaces (rounded when that is float32). Every name and shape is verified first;
    /// all problems (missing, unexpected, mis-shaped keys, a fractional value for an int64
    /// buffer) are listed in ONE xg::Error and the module is left untouched. With strict = false,
    /// missing and unexpected keys are allowed and returned, as PyTorch's load_state_dict does.
    LoadStateDictResult load_state_dict(const NamedArrays& state, bool strict = true);
    /// The keys of state_dict() whose buffers are int64 (e.g. "bn.num_batches_tracked").
    std::set<std::string> int64_keys() const;
    /// The keys of state_dict() whose tensors are float32 (every parameter and floating buffer
    /// after to(kFloat32)).
    std::set<std::string> float32_keys() const;
    /// Saves state_dict() to one NumPy-readable .npz file (written atomically), each entry in its
    /// tensor's dtype as torch.save keeps it: int64 buffers as int64, float32 tensors as float32,
    /// the rest as float64.
    void save(const std::string& path) const;
    /// Loads a file written by save() (or numpy.savez of a PyTorch state_dict; int64, float32 and
    /// float64 entries all load) via load_state_dict. As PyTorch's load_state_dict copies into
    /// the existing tensors, the values take this module's dtypes: a float64 file loaded into a
    /// float32 module is rounded to float32, a float32 file loaded into a float64 module is exact.
    LoadStateDictResult load(const std::string& path, bool strict = true);

    // ---- printing --------------------------------------------------------------------------------

    /// The class name without namespaces ("Linear", "MiniPreLNModel").
    std::string name() const;
    /// The arguments shown inside the parentheses of to_string(), e.g. "in_features=4, ...".
    virtual std::string extra_repr() const { return {}; }
    /// The module tree, formatted like PyTorch's print(model).
    std::string to_string() const;

private:
    std::vector<std::pair<std::string, Tensor>> named_entries(bool buffers, bool recurse) const;
    void state_dict_keys(const std::string& prefix, std::vector<std::string>& out) const;
    void add_child(const std::string& name, std::shared_ptr<Module> module);
    void check_new_name(const std::string& name, const char* what) const;
    std::string to_string(int indent) const;

    bool training_ = true;
    std::vector<std::pair<std::string, Tensor>> parameters_;
    std::vector<std::pair<std::string, Parameter*>> parameter_members_;  // registered with a member
    std::vector<std::pair<std::string, Tensor>> buffers_;
    std::set<std::string> int64_buffers_;  // own buffer names registered as BufferDtype::int64
    std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
    struct ForwardHooks {
        std::vector<std::pair<std::uint64_t, ForwardPreHook>> pre;
        std::vector<std::pair<std::uint64_t, ForwardHook>> post;
    };
    std::shared_ptr<ForwardHooks> hooks_;  // null until the first hook: operator() is then forward()
};

/// Children run one after another: forward(x) = m_n(...m_1(m_0(x))). Named "0", "1", ...
class Sequential : public Module {
public:
    Sequential() = default;
    /// The given modules, named "0", "1", ... in order.
    Sequential(std::initializer_list<std::shared_ptr<Module>> modules);
    /// Appends `module` under the next number; a null module throws xg::Error.
    void push_back(std::shared_ptr<Module> module);
    /// Number of modules.
    std::size_t size() const { return named_children().size(); }
    /// Module i; a negative i counts from the end (-1 is the last), as in PyTorch. Throws
    /// xg::Error when i is outside [-size(), size()).
    std::shared_ptr<Module> operator[](std::int64_t i) const;
    Tensor forward(const Tensor& x) override;
};

/// A list of children named "0", "1", ... with no forward of its own (like torch ModuleList).
class ModuleList : public Module {
public:
    ModuleList() = default;
    /// The given modules, named "0", "1", ... in order.
    ModuleList(std::initializer_list<std::shared_ptr<Module>> modules);
    /// Appends `module` under the next number; a null module throws xg::Error.
    void push_back(std::shared_ptr<Module> module);
    /// Number of modules.
    std::size_t size() const { return named_children().size(); }
    /// Module i; a negative i counts from the end (-1 is the last), as in PyTorch. Throws
    /// xg::Error when i is outside [-size(), size()).
    std::shared_ptr<Module> operator[](std::int64_t i) const;
    /// Element i as its concrete type; throws if it is something else.
    template <class M>
    std::shared_ptr<M> at(std::size_t i) const {
        auto typed = std::dynamic_pointer_cast<M>((*this)[i]);
        if (!typed) wrong_type(i);
        return typed;
    }

private:
    [[noreturn]] void wrong_type(std::size_t i) const;
};

}  // namespace xg::nn
