#include "optim/optimizer.hpp"

#include <cmath>
#include <map>
#include <set>
#include <type_traits>

#include <fmt/format.h>

namespace xg::optim {

namespace {

// A saved 0-d (or one-element) value; anything else is a corrupt state_dict.
double read_scalar(const std::map<std::string, const Array*>& entries, const std::string& key, const char* op) {
    const auto it = entries.find(key);
    if (it == entries.end()) fail(op, fmt::format("the state_dict has no entry '{}'", key));
    if (it->second->size() != 1) {
        fail(op, fmt::format("entry '{}' should hold one value but has shape {}", key, shape_str(shape_of(*it->second))));
    }
    return it->second->data()[0];
}

// A saved count: a finite, non-negative whole number.
std::int64_t read_count(const std::map<std::string, const Array*>& entries, const std::string& key, const char* op) {
    const double v = read_scalar(entries, key, op);
    if (!std::isfinite(v) || v < 0 || v != std::floor(v) || v > 9007199254740992.0) {
        fail(op, fmt::format("entry '{}' should be a non-negative whole number, got {}", key, v));
    }
    return static_cast<std::int64_t>(v);
}

}  // namespace

std::vector<ParamGroupSpec> single_group(std::vector<Tensor> params) {
    return {ParamGroupSpec{std::move(params), std::nullopt, std::nullopt}};
}

Optimizer::Optimizer(std::vector<ParamGroupSpec> groups, double default_lr, double default_weight_decay)
    : default_lr_(default_lr), default_weight_decay_(default_weight_decay) {
    for (const ParamGroupSpec& spec : groups) add_param_group(spec);
}

void Optimizer::add_param_group(const ParamGroupSpec& spec) {
    const std::string op = "optimizer.add_param_group";
    ParamGroup group;
    group.lr = spec.lr.value_or(default_lr_);
    group.weight_decay = spec.weight_decay.value_or(default_weight_decay_);
    group.initial_lr = group.lr;
    if (!(group.lr >= 0.0) || !std::isfinite(group.lr)) fail(op, fmt::format("invalid learning rate {}", group.lr));
    if (!(group.weight_decay >= 0.0) || !std::isfinite(group.weight_decay)) {
        fail(op, fmt::format("invalid weight_decay {}", group.weight_decay));
    }
    for (std::size_t i = 0; i < spec.params.size(); ++i) {
        const Tensor& p = spec.params[i];
        if (!p.defined()) fail(op, fmt::format("parameter {} of group {} is an undefined tensor", i, groups_.size()));
        if (!p.is_leaf()) {
            fail(op, fmt::format("parameter {} of group {} (shape {}) is not a leaf tensor; optimizers update leaves",
                                 i, groups_.size(), shape_str(p.shape())));
        }
        // The same tensor in two places would be updated twice per step.
        for (const ParamGroup& g : groups_) {
            for (const Tensor& q : g.params) {
                if (q.node() == p.node()) {
                    fail(op, fmt::format("parameter {} of group {} (shape {}) is already in an earlier parameter group",
                                         i, groups_.size(), shape_str(p.shape())));
                }
            }
        }
        for (std::size_t j = 0; j < i; ++j) {
            if (spec.params[j].node() == p.node()) {
                fail(op, fmt::format("parameter {} (shape {}) is listed twice in its group (also as parameter {})", i,
                                     shape_str(p.shape()), j));
            }
        }
        group.params.push_back(p);
    }
    states_.resize(states_.size() + group.params.size());
    groups_.push_back(std::move(group));
}

std::size_t Optimizer::num_params() const { return states_.size(); }

void Optimizer::zero_grad() {
    for (ParamGroup& group : groups_) {
        for (Tensor& p : group.params) p.zero_grad();
    }
}

// The state's buffers in T's storage (ParamState::buffers or buffers32). A parameter converted
// to the other dtype after its state was made (Module::to between steps) takes its buffers along,
// converted as torch.optim's load_state_dict would cast them.
template <class T>
std::vector<xt::xarray<T>>& buffers_of(ParamState& state) {
    if constexpr (std::is_same_v<T, float>) {
        if (state.buffers32.empty() && !state.buffers.empty()) {
            for (const Array& b : state.buffers) state.buffers32.push_back(to_float32_array(b));
            state.buffers.clear();
        }
        return state.buffers32;
    } else {
        if (state.buffers.empty() && !state.buffers32.empty()) {
            for (const FloatArray& b : state.buffers32) state.buffers.push_back(to_float64_array(b));
            state.buffers32.clear();
        }
        return state.buffers;
    }
}

template <class T>
void Optimizer::step_parameter(const ParamGroup& group, Tensor& p, ParamState& state, std::size_t index) {
    // Native storage for float32 (values<T>, grad_values<T>): a float32 parameter gets no float64
    // mirror. T = double reads the float64 values of any other dtype: a bfloat16 parameter steps
    // through its float64 mirrors (float64 state), the result stored once into bfloat16.
    const xt::xarray<T>& grad = [&]() -> const xt::xarray<T>& {
        if constexpr (std::is_same_v<T, double>) return p.grad_value();
        else return p.grad_values<T>();
    }();
    const std::size_t n = p.numel();
    if (grad.size() != n) {
        fail(name() + ".step", fmt::format("parameter {} has shape {} but its gradient has shape {}", index,
                                           shape_str(p.shape()), shape_str(Shape(grad.shape().begin(), grad.shape().end()))));
    }
    std::vector<xt::xarray<T>>& buffers = buffers_of<T>(state);
    if (!state.initialized()) buffers.assign(buffer_names().size(), xt::xarray<T>(xt::zeros<T>(p.shape())));
    UpdateSpan<T> span{nullptr, grad.data(), {}, n, state.step + 1};
    for (xt::xarray<T>& buffer : buffers) {
        // A parameter whose storage was replaced by one of another size would be updated out of bounds.
        if (buffer.size() != n) {
            fail(name() + ".step", fmt::format("parameter {} now has shape {} but its optimizer state has shape {}", index,
                                               shape_str(p.shape()), shape_str(Shape(buffer.shape().begin(), buffer.shape().end()))));
        }
        span.buffers.push_back(buffer.data());
    }
    ++state.step;
    if constexpr (std::is_same_v<T, double>) span.param = p.mutable_value().data();
    else span.param = p.mutable_values<T>().data();
    update(group, span);
}

void Optimizer::step() {
    std::size_t index = 0;
    for (ParamGroup& group : groups_) {
        for (Tensor& p : group.params) {
            ParamState& state = states_[index++];
            if (!p.has_grad()) continue;
            // The state has the parameter's dtype (as PyTorch's): a float32 parameter's moments are float32 storage.
            if (p.dtype() == Dtype::Float32) step_parameter<float>(group, p, state, index - 1);
            else step_parameter<double>(group, p, state, index - 1);
        }
    }
}

NamedArrays Optimizer::state_dict() const {
    NamedArrays out;
    for (std::size_t g = 0; g < groups_.size(); ++g) {
        const std::string prefix = fmt::format("param_groups.{}.", g);
        out.emplace_back(prefix + "lr", scalar_array(groups_[g].lr));
        out.emplace_back(prefix + "initial_lr", scalar_array(groups_[g].initial_lr));
        out.emplace_back(prefix + "weight_decay", scalar_array(groups_[g].weight_decay));
        out.emplace_back(prefix + "num_params", scalar_array(static_cast<double>(groups_[g].params.size())));
    }
    const std::vector<std::string> names = buffer_names();
    for (std::size_t i = 0; i < states_.size(); ++i) {
        if (!states_[i].initialized()) continue;
        out.emplace_back(fmt::format("state.{}.step", i), scalar_array(static_cast<double>(states_[i].step)));
        const ParamState& st = states_[i];
        for (std::size_t b = 0; b < names.size(); ++b) {
            // float32 buffers widen exactly; float32_keys() marks them to be saved as '<f4'
            out.emplace_back(fmt::format("state.{}.{}", i, names[b]),
                             st.buffers32.empty() ? st.buffers[b] : to_float64_array(st.buffers32[b]));
        }
    }
    return out;
}

std::set<std::string> Optimizer::float32_keys() const {
    std::set<std::string> out;
    const std::vector<std::string> names = buffer_names();
    std::size_t i = 0;
    for (const ParamGroup& group : groups_) {
        for (const Tensor& p : group.params) {
            const ParamState& state = states_[i];
            if (state.initialized() && p.dtype() == Dtype::Float32) {
                for (const std::string& name : names) out.insert(fmt::format("state.{}.{}", i, name));
            }
            ++i;
        }
    }
    return out;
}

std::vector<ParamState> Optimizer::parse_states(const NamedArrays& state) const {
    const std::string op_name = name() + ".load_state_dict";
    const char* op = op_name.c_str();
    std::map<std::string, const Array*> entries;
    for (const auto& [key, value] : state) {
        if (!entries.emplace(key, &value).second) fail(op, fmt::format("entry '{}' appears twice", key));
    }
    std::set<std::string> expected;
    for (std::size_t g = 0;; ++g) {
        const bool present = entries.count(fmt::format("param_groups.{}.lr", g)) > 0;
        if (g < groups_.size() && !present) {
            fail(op, fmt::format("the state_dict has no parameter group {} but this {} has {} groups", g, name(),
                                 groups_.size()));
        }
        if (g >= groups_.size()) {
            if (present) fail(op, fmt::format("the state_dict has more parameter groups than this {} ({})", name(), groups_.size()));
            break;
        }
        const std::string prefix = fmt::format("param_groups.{}.", g);
        const std::int64_t n = read_count(entries, prefix + "num_params", op);
        if (static_cast<std::size_t>(n) != groups_[g].params.size()) {
            fail(op, fmt::format("parameter group {} holds {} parameters in the state_dict but {} here", g, n,
                                 groups_[g].params.size()));
        }
        expected.insert(prefix + "num_params");
        for (const char* field : {"lr", "initial_lr", "weight_decay"}) {
            const double v = read_scalar(entries, prefix + field, op);
            if (!std::isfinite(v) || v < 0) fail(op, fmt::format("entry '{}{}' is invalid: {}", prefix, field, v));
            expected.insert(prefix + field);
        }
    }
    const std::vector<std::string> names = buffer_names();
    std::vector<ParamState> states(states_.size());
    std::size_t index = 0;
    for (const ParamGroup& group : groups_) {
        for (const Tensor& p : group.params) {
            const std::string prefix = fmt::format("state.{}.", index);
            ParamState& s = states[index++];
            if (!entries.count(prefix + "step")) continue;
            s.step = read_count(entries, prefix + "step", op);
            expected.insert(prefix + "step");
            if (s.step == 0) fail(op, fmt::format("entry '{}step' is 0 but buffers are only saved after a step", prefix));
            for (const std::string& buffer : names) {
                const auto it = entries.find(prefix + buffer);
                if (it == entries.end()) fail(op, fmt::format("the state_dict has no entry '{}{}'", prefix, buffer));
                if (shape_of(*it->second) != p.shape()) {
                    fail(op, fmt::format("entry '{}{}' has shape {} but parameter {} has shape {}", prefix, buffer,
                                         shape_str(shape_of(*it->second)), index - 1, shape_str(p.shape())));
                }
                if (p.dtype() == Dtype::Float32) s.buffers32.push_back(to_float32_array(*it->second));
                else s.buffers.push_back(*it->second);
                expected.insert(prefix + buffer);
            }
        }
    }
    for (const auto& entry : state) {
        if (!expected.count(entry.first)) {
            fail(op, fmt::format("unexpected entry '{}' (state of a different optimizer or model?)", entry.first));
        }
    }
    return states;
}

void Optimizer::validate_state_dict(const NamedArrays& state) const { parse_states(state); }

void Optimizer::load_state_dict(const NamedArrays& state) {
    std::vector<ParamState> states = parse_states(state);
    std::map<std::string, double> values;
    for (const auto& [key, value] : state) {
        if (key.rfind("param_groups.", 0) == 0) values[key] = value.data()[0];
    }
    for (std::size_t g = 0; g < groups_.size(); ++g) {
        const std::string prefix = fmt::format("param_groups.{}.", g);
        groups_[g].lr = values.at(prefix + "lr");
        groups_[g].initial_lr = values.at(prefix + "initial_lr");
        groups_[g].weight_decay = values.at(prefix + "weight_decay");
    }
    states_ = std::move(states);
}

}  // namespace xg::optim
