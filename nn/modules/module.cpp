#include "nn/modules/module.hpp"

#include <cxxabi.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <typeinfo>

#include <fmt/format.h>

#include "core/io/io.hpp"

namespace xg::nn {

namespace {

std::string join(const std::vector<std::string>& items) {
    std::string s;
    for (std::size_t i = 0; i < items.size(); ++i) s += (i ? ", " : "") + items[i];
    return s;
}

}  // namespace

Tensor Module::forward(const Tensor& x) {
    fail(name(), fmt::format("has no one-tensor forward (called with shape {}); call its own forward overload",
                             shape_str(x.shape())));
}

Tensor Module::operator()(const Tensor& x) {
    if (!hooks_) return forward(x);
    const std::shared_ptr<ForwardHooks> hooks = hooks_;  // a hook may remove itself while running
    for (const auto& entry : std::vector(hooks->pre)) entry.second(*this, x);
    Tensor y = forward(x);
    for (const auto& entry : std::vector(hooks->post)) entry.second(*this, x, y);
    return y;
}

namespace {
std::atomic<std::uint64_t> g_forward_hook_ids{0};

// Removes the hook registered under `id` from `hooks`.
template <class Hook>
void erase_id(std::vector<std::pair<std::uint64_t, Hook>>& hooks, std::uint64_t id) {
    hooks.erase(std::remove_if(hooks.begin(), hooks.end(), [id](const auto& entry) { return entry.first == id; }), hooks.end());
}
}  // namespace

RemovableHandle Module::register_forward_pre_hook(ForwardPreHook hook) {
    if (!hook) fail(name(), "register_forward_pre_hook: the hook is empty");
    if (!hooks_) hooks_ = std::make_shared<ForwardHooks>();
    const std::uint64_t id = g_forward_hook_ids.fetch_add(1, std::memory_order_relaxed) + 1;
    hooks_->pre.emplace_back(id, std::move(hook));
    return RemovableHandle([weak = std::weak_ptr<ForwardHooks>(hooks_), id] {
        if (auto hooks = weak.lock()) erase_id(hooks->pre, id);
    });
}

RemovableHandle Module::register_forward_hook(ForwardHook hook) {
    if (!hook) fail(name(), "register_forward_hook: the hook is empty");
    if (!hooks_) hooks_ = std::make_shared<ForwardHooks>();
    const std::uint64_t id = g_forward_hook_ids.fetch_add(1, std::memory_order_relaxed) + 1;
    hooks_->post.emplace_back(id, std::move(hook));
    return RemovableHandle([weak = std::weak_ptr<ForwardHooks>(hooks_), id] {
        if (auto hooks = weak.lock()) erase_id(hooks->post, id);
    });
}

std::size_t positive_size(std::int64_t value, const char* op, const char* argument) {
    if (value <= 0) fail(op, fmt::format("{} must be positive, got {}", argument, value));
    return static_cast<std::size_t>(value);
}

// ---- Parameter ----------------------------------------------------------------------------------

Parameter& Parameter::operator=(const Tensor& values) {
    const std::string what = name_.empty() ? "parameter" : "parameter '" + name_ + "'";
    if (!defined()) {
        fail("Parameter", fmt::format("cannot assign to an undefined {} (a module built without it, e.g. the bias "
                                      "of Linear(in, out, false))", what));
    }
    if (!values.defined()) fail("Parameter", fmt::format("cannot assign an undefined tensor to {}", what));
    if (values.node() == node()) return *this;
    if (values.shape() != shape()) {
        fail("Parameter", fmt::format("cannot assign a tensor of shape {} to {} of shape {}: assignment copies values "
                                      "into the registered tensor; Module::replace_parameter puts another tensor in "
                                      "its place", shape_str(values.shape()), what, shape_str(shape())));
    }
    mutable_value() = values.value();
    return *this;
}

Parameter& Parameter::operator=(const Parameter& values) { return *this = static_cast<const Tensor&>(values); }

// ---- registration -------------------------------------------------------------------------------

void Module::check_new_name(const std::string& name, const char* what) const {
    if (name.empty() || name.find('.') != std::string::npos) {
        fail(this->name(), fmt::format("{} name '{}' must be non-empty and contain no '.'", what, name));
    }
    auto taken = [&](const auto& list) {
        for (const auto& entry : list) {
            if (entry.first == name) return true;
        }
        return false;
    };
    if (taken(parameters_) || taken(buffers_) || taken(children_)) {
        fail(this->name(), fmt::format("cannot register {} '{}': the name is already used", what, name));
    }
}

Tensor Module::register_parameter(const std::string& name, Tensor tensor, bool requires_grad) {
    check_new_name(name, "parameter");
    if (!tensor.defined()) fail(this->name(), fmt::format("parameter '{}' is an undefined tensor", name));
    if (!tensor.is_leaf()) fail(this->name(), fmt::format("parameter '{}' must be a leaf tensor, not the result of '{}'", name, tensor.op()));
    tensor.requires_grad_(requires_grad);
    parameters_.emplace_back(name, tensor);
    return tensor;
}

void Module::register_parameter(const std::string& name, Parameter& member, Tensor value, bool requires_grad) {
    if (member.defined()) {
        fail(this->name(), fmt::format("cannot register parameter '{}': its member already holds parameter '{}'", name,
                                       member.name()));
    }
    static_cast<Tensor&>(member) = register_parameter(name, std::move(value), requires_grad);
    member.name_ = name;
    parameter_members_.emplace_back(name, &member);
}

void Module::replace_parameter(const std::string& name, Tensor tensor) {
    const std::size_t dot = name.find('.');
    if (dot != std::string::npos) {  // "layernorm_c.weight": the child's own parameter
        const std::string child = name.substr(0, dot);
        for (auto& [child_name, module] : children_) {
            if (child_name == child) return module->replace_parameter(name.substr(dot + 1), std::move(tensor));
        }
        fail(this->name(), fmt::format("replace_parameter: no submodule named '{}' (for '{}')", child, name));
    }
    auto entry = std::find_if(parameters_.begin(), parameters_.end(), [&](const auto& e) { return e.first == name; });
    if (entry == parameters_.end()) {
        std::vector<std::string> names;
        for (const auto& e : parameters_) names.push_back(e.first);
        fail(this->name(), fmt::format("replace_parameter: no parameter named '{}' (this module has: {})", name,
                                       names.empty() ? std::string("none") : join(names)));
    }
    if (!tensor.defined()) fail(this->name(), fmt::format("replace_parameter: '{}' cannot be replaced by an undefined tensor", name));
    if (!tensor.is_leaf()) {
        fail(this->name(), fmt::format("replace_parameter: '{}' must be replaced by a leaf tensor, not the result of '{}'", name,
                                       tensor.op()));
    }
    if (tensor.shape() != entry->second.shape()) {
        fail(this->name(), fmt::format("replace_parameter: '{}' has shape {} but the replacement has shape {}", name,
                                       shape_str(entry->second.shape()), shape_str(tensor.shape())));
    }
    tensor.requires_grad_(entry->second.requires_grad());
    entry->second = tensor;
    for (auto& [member_name, member] : parameter_members_) {
        if (member_name == name) static_cast<Tensor&>(*member) = tensor;
    }
}

Tensor Module::register_buffer(const std::string& name, Tensor tensor, BufferDtype dtype) {
    check_new_name(name, "buffer");
    if (!tensor.defined()) fail(this->name(), fmt::format("buffer '{}' is an undefined tensor", name));
    buffers_.emplace_back(name, tensor);
    if (dtype == BufferDtype::int64) int64_buffers_.insert(name);
    return tensor;
}

void Module::replace_buffer(const std::string& name, Tensor tensor) {
    auto entry = std::find_if(buffers_.begin(), buffers_.end(), [&](const auto& e) { return e.first == name; });
    if (entry == buffers_.end()) fail(this->name(), fmt::format("replace_buffer: no buffer named '{}'", name));
    if (!tensor.defined()) fail(this->name(), fmt::format("replace_buffer: '{}' cannot be replaced by an undefined tensor", name));
    if (tensor.shape() != entry->second.shape()) {
        fail(this->name(), fmt::format("replace_buffer: '{}' has shape {} but the replacement has shape {}", name,
                                       shape_str(entry->second.shape()), shape_str(tensor.shape())));
    }
    entry->second = std::move(tensor);
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
    check_new_name(name, "submodule");
    if (!module) fail(this->name(), fmt::format("submodule '{}' is null", name));
    children_.emplace_back(name, std::move(module));
}

void Module::replace_module(const std::string& name, std::shared_ptr<Module> module) {
    if (!module) fail(this->name(), fmt::format("replace_module: the module for '{}' is null", name));
    for (auto& [child_name, child] : children_) {
        if (child_name != name) continue;
        child = std::move(module);
        return;
    }
    fail(this->name(), fmt::format("replace_module: there is no submodule '{}'", name));
}

// ---- traversal ----------------------------------------------------------------------------------

std::vector<std::pair<std::string, Tensor>> Module::named_entries(bool buffers, bool recurse) const {
    const auto& own = buffers ? buffers_ : parameters_;
    std::vector<std::pair<std::string, Tensor>> out(own.begin(), own.end());
    if (!recurse) return out;
    for (const auto& [child_name, child] : children_) {
        for (auto& [n, t] : child->named_entries(buffers, true)) out.emplace_back(child_name + "." + n, t);
    }
    return out;
}

namespace {

// A tensor shared by two modules (tied weights) is listed once, under its first name, so an
// optimizer never steps it twice.
std::vector<std::pair<std::string, Tensor>> first_occurrences(std::vector<std::pair<std::string, Tensor>> all) {
    std::vector<std::pair<std::string, Tensor>> out;
    std::set<const Node*> seen;
    for (auto& entry : all) {
        if (seen.insert(entry.second.node().get()).second) out.push_back(std::move(entry));
    }
    return out;
}

}  // namespace

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
    return first_occurrences(named_entries(false, recurse));
}

std::vector<Tensor> Module::parameters(bool recurse) const {
    std::vector<Tensor> out;
    for (auto& entry : named_parameters(recurse)) out.push_back(entry.second);
    return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
    return first_occurrences(named_entries(true, recurse));
}

std::vector<Tensor> Module::buffers(bool recurse) const {
    std::vector<Tensor> out;
    for (auto& entry : named_buffers(recurse)) out.push_back(entry.second);
    return out;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
    std::vector<std::shared_ptr<Module>> out;
    for (const auto& entry : children_) out.push_back(entry.second);
    return out;
}

// ---- mode and gradients -------------------------------------------------------------------------

void Module::train(bool on) {
    training_ = on;
    for (auto& entry : children_) entry.second->train(on);
}

void Module::zero_grad() {
    for (Tensor& p : parameters()) p.zero_grad();
}

Module& Module::to(Dtype dtype) {
    for (Tensor& p : parameters()) p.convert_in_place(dtype);
    const std::set<std::string> int64 = int64_keys();
    for (auto& [name, buffer] : named_buffers()) {
        if (!int64.count(name)) buffer.convert_in_place(dtype);
    }
    return *this;
}

// ---- state --------------------------------------------------------------------------------------

NamedArrays Module::state_dict() const {
    // PyTorch order: per module its parameters, then its buffers, then the children's.
    NamedArrays out;
    for (const auto& [n, t] : parameters_) out.emplace_back(n, t.value());
    for (const auto& [n, t] : buffers_) out.emplace_back(n, t.value());
    for (const auto& [child_name, child] : children_) {
        for (auto& [n, a] : child->state_dict()) out.emplace_back(child_name + "." + n, std::move(a));
    }
    return out;
}

void Module::state_dict_keys(const std::string& prefix, std::vector<std::string>& out) const {
    for (const auto& entry : parameters_) out.push_back(prefix + entry.first);
    for (const auto& entry : buffers_) out.push_back(prefix + entry.first);
    for (const auto& [child_name, child] : children_) child->state_dict_keys(prefix + child_name + ".", out);
}

std::set<std::string> Module::int64_keys() const {
    std::set<std::string> out = int64_buffers_;
    for (const auto& [child_name, child] : children_) {
        for (const std::string& key : child->int64_keys()) out.insert(child_name + "." + key);
    }
    return out;
}

LoadStateDictResult Module::load_state_dict(const NamedArrays& state, bool strict) {
    std::map<std::string, Tensor> own;  // every key state_dict() has, tied tensors under each name
    for (auto& entry : named_entries(false, true)) own.emplace(entry);
    for (auto& entry : named_entries(true, true)) own.emplace(entry);

    // Verify everything before touching anything, so a bad file leaves the model as it was.
    const std::set<std::string> integer_keys = int64_keys();
    std::vector<std::string> unexpected, misshaped, duplicated, missing, fractional;
    std::map<std::string, const Array*> incoming;
    for (const auto& [key, value] : state) {
        if (!incoming.emplace(key, &value).second) {
            duplicated.push_back(key);
            continue;
        }
        auto it = own.find(key);
        if (it == own.end()) {
            unexpected.push_back(key);
        } else if (it->second.shape() != shape_of(value)) {
            misshaped.push_back(fmt::format("{} (model {}, given {})", key, shape_str(it->second.shape()),
                                            shape_str(shape_of(value))));
        } else if (integer_keys.count(key)) {
            for (double v : value) {
                if (v != std::floor(v)) {  // also NaN and inf
                    fractional.push_back(fmt::format("{} (holds {})", key, v));
                    break;
                }
            }
        }
    }
    for (const auto& entry : own) {
        if (!incoming.count(entry.first)) missing.push_back(entry.first);
    }
    std::vector<std::string> problems;
    if (strict && !missing.empty()) problems.push_back(fmt::format("missing keys: {}", join(missing)));
    if (strict && !unexpected.empty()) problems.push_back(fmt::format("unexpected keys: {}", join(unexpected)));
    if (!misshaped.empty()) problems.push_back(fmt::format("shape mismatches: {}", join(misshaped)));
    if (!duplicated.empty()) problems.push_back(fmt::format("duplicated keys: {}", join(duplicated)));
    if (!fractional.empty()) problems.push_back(fmt::format("int64 buffers given non-integer values: {}", join(fractional)));
    if (!problems.empty()) {
        std::string msg = fmt::format("cannot load state into {} ({} problem kinds; nothing was changed)", name(), problems.size());
        for (const auto& p : problems) msg += "\n  " + p;
        fail("load_state_dict", msg);
    }
    for (auto& [key, tensor] : own) {
        auto it = incoming.find(key);
        if (it != incoming.end()) tensor.mutable_value() = *it->second;
    }
    LoadStateDictResult result;  // missing keys in state_dict() order, as PyTorch lists them
    std::vector<std::string> keys;
    state_dict_keys("", keys);
    for (const std::string& key : keys) {
        if (!incoming.count(key)) result.missing_keys.push_back(key);
    }
    result.unexpected_keys = std::move(unexpected);
    return result;
}

std::set<std::string> Module::float32_keys() const {
    std::set<std::string> out;
    for (const auto& [key, tensor] : named_entries(false, true)) {
        if (tensor.dtype() == Dtype::Float32) out.insert(key);
    }
    for (const auto& [key, tensor] : named_entries(true, true)) {
        if (tensor.dtype() == Dtype::Float32) out.insert(key);
    }
    return out;
}

void Module::save(const std::string& path) const {
    save_npz(path, state_dict(), false, int64_keys(), float32_keys());
}

LoadStateDictResult Module::load(const std::string& path, bool strict) {
    const NamedArrays state = load_npz(path);
    try {
        return load_state_dict(state, strict);
    } catch (const Error& e) {
        throw Error(fmt::format("{} (from file '{}')", e.what(), path));
    }
}

// ---- printing -----------------------------------------------------------------------------------

std::string Module::name() const {
    const char* mangled = typeid(*this).name();
    int status = 0;
    char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
    std::string full = status == 0 && demangled ? demangled : mangled;
    std::free(demangled);
    // Strip namespaces ("xg::nn::Linear" -> "Linear") but not inside template arguments.
    const std::size_t template_start = full.find('<');
    const std::size_t colon = full.rfind("::", template_start);
    return colon == std::string::npos ? full : full.substr(colon + 2);
}

std::string Module::to_string() const { return to_string(0); }

std::string Module::to_string(int indent) const {
    const std::string extra = extra_repr();
    std::string s = name() + "(";
    if (children_.empty()) return s + extra + ")";
    const std::string pad(static_cast<std::size_t>(indent + 2), ' ');
    s += "\n";
    if (!extra.empty()) s += pad + extra + "\n";  // PyTorch puts it on its own line above the children
    for (const auto& [child_name, child] : children_) {
        s += fmt::format("{}({}): {}\n", pad, child_name, child->to_string(indent + 2));
    }
    return s + std::string(static_cast<std::size_t>(indent), ' ') + ")";
}

// ---- containers ---------------------------------------------------------------------------------

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) {
    for (const auto& m : modules) push_back(m);
}

void Sequential::push_back(std::shared_ptr<Module> module) { register_module(std::to_string(size()), std::move(module)); }

namespace {
// Python's rule for a list index: -1 is the last element.
std::size_t list_index(std::int64_t i, std::size_t size, const char* container) {
    const auto n = static_cast<std::int64_t>(size);
    if (i < -n || i >= n) fail(container, fmt::format("index {} is out of range for a {} of {} modules", i, container, size));
    return static_cast<std::size_t>(i < 0 ? i + n : i);
}
}  // namespace

std::shared_ptr<Module> Sequential::operator[](std::int64_t i) const {
    return named_children()[list_index(i, size(), "Sequential")].second;
}

Tensor Sequential::forward(const Tensor& x) {
    Tensor y = x;
    for (const auto& entry : named_children()) y = (*entry.second)(y);
    return y;
}

ModuleList::ModuleList(std::initializer_list<std::shared_ptr<Module>> modules) {
    for (const auto& m : modules) push_back(m);
}

void ModuleList::push_back(std::shared_ptr<Module> module) { register_module(std::to_string(size()), std::move(module)); }

std::shared_ptr<Module> ModuleList::operator[](std::int64_t i) const {
    return named_children()[list_index(i, size(), "ModuleList")].second;
}

void ModuleList::wrong_type(std::size_t i) const {
    fail("ModuleList", fmt::format("element {} is a {}, not the requested type", i, (*this)[i]->name()));
}

}  // namespace xg::nn
