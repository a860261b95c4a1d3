// Gradient checks of a module: its input(s) and the parameters it registered, checked together by
// putting gradcheck's copies in the parameters' places for each forward.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/engine/random.hpp"
#include "nn/modules/module.hpp"
#include "tests/support/gradcheck_support.hpp"

namespace xg::test {

/// A parameter of a module: the module and the name it registered the parameter under.
using Slot = std::pair<nn::Module*, std::string>;

/// The parameter `slot` names, dotted names reaching into children as in named_parameters()
/// (std::logic_error if the module has none of that name).
inline Tensor registered(const Slot& slot) {
    for (const auto& [n, t] : slot.first->named_parameters()) {
        if (n == slot.second) return t;
    }
    throw std::logic_error("no parameter " + slot.second);
}

/// Checks forward(inputs) w.r.t. the inputs and the parameters in `slots` (gradcheck's copies are
/// put in their place for each forward, and the originals restored after).
inline void check_module(const std::string& name, const std::function<Tensor(const std::vector<Tensor>&)>& forward,
                         std::vector<Tensor> inputs, const std::vector<Slot>& slots) {
    const std::size_t n = inputs.size();
    std::vector<Tensor> saved;
    for (const Slot& s : slots) {
        saved.push_back(registered(s));
        inputs.emplace_back(saved.back().value(), true);
    }
    auto f = [&](const std::vector<Tensor>& in) {
        for (std::size_t i = 0; i < slots.size(); ++i) slots[i].first->replace_parameter(slots[i].second, in[n + i]);
        return forward(std::vector<Tensor>(in.begin(), in.begin() + static_cast<long>(n)));
    };
    check_gradient(f, inputs, name);
    for (std::size_t i = 0; i < slots.size(); ++i) slots[i].first->replace_parameter(slots[i].second, saved[i]);
}

/// check_module for a forward of one input x.
inline void check_module(const std::string& name, const std::function<Tensor(const Tensor&)>& forward, const Tensor& x,
                         const std::vector<Slot>& slots) {
    check_module(name, [&](const std::vector<Tensor>& in) { return forward(in[0]); }, std::vector<Tensor>{x}, slots);
}

/// check_module of m.forward(x), the module's own one-input forward.
template <class M>
void check_forward(const std::string& name, M& m, const Tensor& x, const std::vector<Slot>& slots) {
    check_module(name, [&](const Tensor& in) { return m.forward(in); }, x, slots);
}

/// The slots of a module's "weight" and "bias".
inline std::vector<Slot> affine_slots(nn::Module& m) { return {{&m, "weight"}, {&m, "bias"}}; }

/// The slots of every parameter of `m` and its children, in named_parameters() order.
inline std::vector<Slot> every_parameter(nn::Module& m) {
    std::vector<Slot> slots;
    for (const auto& entry : m.named_parameters()) slots.emplace_back(&m, entry.first);
    return slots;
}

/// Checks m.forward(x) w.r.t. x and the module's weight and bias, set to `leaves`' values: off the
/// init of 1 and 0, where a backward that dropped the weight or the bias would still pass.
template <class M>
void check_affine_module(const std::string& name, M& m, const NormLeaves& leaves) {
    check_gradient([&](const std::vector<Tensor>& t) {
        m.replace_parameter("weight", t[1]);
        m.replace_parameter("bias", t[2]);
        return m.forward(t[0]);
    }, {leaves.x, leaves.weight, leaves.bias}, name);
}

/// Moves every parameter of `m` away from its trivial init (+ 0.5 N(0, 1)) so every term matters.
inline void perturb(nn::Module& m, std::uint64_t seed) {
    Generator gen(seed);
    for (Tensor& p : m.parameters()) {
        for (double& v : p.mutable_value()) v += 0.5 * gen.normal();
    }
}

}  // namespace xg::test
