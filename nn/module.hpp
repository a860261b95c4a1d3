// xg::nn::Module: the base of every layer and model, after PyTorch's C++ frontend.
//
// Modules are held by shared handle (`auto net = std::make_shared<Net>();`). A module owns named
// parameters (leaf Tensors with requires_grad), buffers (Tensors that are state but not trained,
// e.g. BatchNorm's running statistics) and child modules, each kept in registration order so
// parameters(), state_dict() and to_string() list things the way PyTorch does.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.hpp"

namespace xg::nn {

/// Parameters and buffers by dotted name ("blocks.0.ln.weight"); same type as xg::NamedArrays.
using StateDict = std::vector<std::pair<std::string, Array>>;

/// The element type of a state_dict entry in files. Every value is a double in memory; a buffer
/// that PyTorch keeps as int64 (BatchNorm's num_batches_tracked) is registered as int64, holds
/// whole numbers, and is written to .npz as int64 so the file matches PyTorch's state_dict.
enum class Dtype { float64, int64 };

/// What load_state_dict reports, like PyTorch's (missing_keys, unexpected_keys) result: the
/// module's keys the state lacked and the state's keys the module has no place for. Both are
/// empty after a strict load (which throws otherwise).
struct LoadStateDictResult {
    /// Keys of state_dict() that the loaded state did not have (left unchanged).
    std::vector<std::string> missing_keys;
    /// Keys of the loaded state that this module does not have (ignored).
    std::vector<std::string> unexpected_keys;
};

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

    // ---- registration (call from subclass constructors) ---------------------------------------

    /// Registers a parameter under `name` and marks it requires_grad; returns the same handle.
    Tensor register_parameter(const std::string& name, Tensor tensor, bool requires_grad = true);
    /// Registers a buffer (saved in state_dict, never trained); returns the same handle. An
    /// int64 buffer must hold whole numbers and is written to files as int64.
    Tensor register_buffer(const std::string& name, Tensor tensor, Dtype dtype = Dtype::float64);
    /// Registers a child module; returns it so it can be stored in a typed member.
    template <class M>
    std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
        add_child(name, module);
        return module;
    }

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

    // ---- state -----------------------------------------------------------------------------------

    /// Copies of every parameter then buffer value per module, depth first, with dotted names.
    StateDict state_dict() const;
    /// Replaces parameter and buffer values from `state`. Every name and shape is verified first;
    /// all problems (missing, unexpected, mis-shaped keys, a fractional value for an int64
    /// buffer) are listed in ONE xg::Error and the module is left untouched. With strict = false,
    /// missing and unexpected keys are allowed and returned, as PyTorch's load_state_dict does.
    LoadStateDictResult load_state_dict(const StateDict& state, bool strict = true);
    /// The keys of state_dict() whose buffers are int64 (e.g. "bn.num_batches_tracked").
    std::set<std::string> int64_keys() const;
    /// Saves state_dict() to one NumPy-readable .npz file (written atomically); int64 buffers
    /// are stored as int64, the rest as float64.
    void save(const std::string& path) const;
    /// Loads a file written by save() (or numpy.savez of a PyTorch state_dict; int64 and float64
    /// entries both load) via load_state_dict.
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
    std::vector<std::pair<std::string, Tensor>> buffers_;
    std::set<std::string> int64_buffers_;  // own buffer names registered as Dtype::int64
    std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
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
    /// Module i; throws xg::Error when i >= size().
    std::shared_ptr<Module> operator[](std::size_t i) const;
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
    /// Module i; throws xg::Error when i >= size().
    std::shared_ptr<Module> operator[](std::size_t i) const;
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
