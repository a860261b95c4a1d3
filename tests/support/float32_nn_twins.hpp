// What the float32 twins of nn/ share (tests/<area>/test_<area>_float32.cpp, `ctest -L float32`):
// each area lists its twins in one function and registers it, so that its test case runs them
// on both kernel tiers and tests/modules/test_modules_coverage_float32.cpp can check that every op
// nn/ records is reached by some twin in float32.
//
// The condition of a twin is the bound, in units of u = 2^-24, on its normwise error
// max |a32 - a64| / max |a64| over every output and input gradient (tests/support/float32_twin.hpp).
// A float32 tensor stores float32 values and computes in float64 between stores (docs/precision.md),
// so the error of one op is its inputs' rounding (u relative each, amplified by the op's
// condition) plus one rounding of its result (u): the float64 arithmetic adds nothing at this scale.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/engine/kernel_tier.hpp"
#include "core/engine/random.hpp"
#include "nn/modules/module.hpp"
#include "tests/support/float32_twin.hpp"

namespace xg::nn::functional {}  // declared for the alias F of nn_twin_names below

namespace xg_test_support {

using xg::test::TwinFunction;

/// One twin: f on inputs64 (leaves; those with requires_grad get their gradients compared), within
/// condition u, the bound derived beside each twin.
using NnTwin = xg::test::Float32Twin;
using NnTwinList = std::vector<NnTwin>;
using NnTwinMaker = NnTwinList (*)();

/// Every area's twins, registered at start-up by RegisterNnTwins.
inline std::vector<std::pair<std::string, NnTwinMaker>>& nn_twin_registry() {
    static std::vector<std::pair<std::string, NnTwinMaker>> registry;
    return registry;
}
struct RegisterNnTwins {
    RegisterNnTwins(const char* area, NnTwinMaker make) { nn_twin_registry().emplace_back(area, make); }
};

/// A leaf of scale * N(0, 1) + shift from its own generator, float64, requiring a gradient.
inline xg::Tensor twin_leaf(const xg::Shape& shape, std::uint64_t seed, double scale = 1.0, double shift = 0.0,
                            bool requires_grad = true) {
    xg::Generator gen(seed);
    xg::Array a = xg::randn(shape, gen).value() * scale + shift;
    return xg::Tensor(std::move(a), xg::kFloat64, requires_grad);
}

/// Runs the twins make(tier) lists on each kernel tier, reference then fast (the fused ops have
/// both), under that tier: for an area whose bounds differ between the tiers.
inline void run_nn_twins_per_tier(const std::function<NnTwinList(xg::KernelTier)>& make) {
    for (const xg::KernelTier tier : {xg::KernelTier::reference, xg::KernelTier::fast}) {
        const xg::KernelTierGuard guard(tier);
        const char* tier_name = tier == xg::KernelTier::reference ? "reference" : "fast";
        for (const NnTwin& t : make(tier)) xg::test::check_float32_twin(t.name + " [" + tier_name + "]", t.f, t.inputs64, t.condition,
                                                                         xg::test::TwinNorm::normwise);
    }
}

/// Runs every twin on the reference and on the fast kernels, with the same bounds on both.
inline void run_nn_twins(const NnTwinList& twins) {
    run_nn_twins_per_tier([&twins](xg::KernelTier) { return twins; });
}

/// f for a module: inputs[0] is the module's input, inputs[1..] its parameters in
/// named_parameters() order; each call puts the inputs in place of its parameters, converts the
/// module to inputs[0]'s dtype (Module::to: the buffers follow) and restores the buffers it
/// started with (a BatchNorm's running statistics), so the float64 and float32 runs start alike.
inline TwinFunction module_twin(std::shared_ptr<xg::nn::Module> m,
                                std::function<std::vector<xg::Tensor>(xg::nn::Module&, const xg::Tensor&)> forward) {
    std::vector<xg::Array> buffers0;
    for (const xg::Tensor& b : m->buffers()) buffers0.push_back(b.value());
    return [m, forward, buffers0](const std::vector<xg::Tensor>& in) {
        const auto params = m->named_parameters();
        for (std::size_t i = 0; i < params.size(); ++i) {
            // replace_parameter gives the replacement the replaced one's requires_grad: set that to the input's
            // first, so that an input given without a gradient (not_compared) keeps none for every later run
            xg::Tensor(params[i].second).requires_grad_(in[i + 1].requires_grad());
            m->replace_parameter(params[i].first, in[i + 1]);
        }
        m->to(in[0].dtype());  // after the replacement: converts the buffers only, never the caller's inputs
        std::vector<xg::Tensor> buffers = m->buffers();
        for (std::size_t i = 0; i < buffers.size(); ++i) buffers[i].mutable_value() = buffers0[i];
        return forward(*m, in[0]);
    };
}

/// The inputs of module_twin: x, then float64 leaves holding the module's parameters, each
/// requiring a gradient unless named in `not_compared` (a gradient that is 0 in exact arithmetic
/// has only roundoff to compare: no relative tolerance fits it).
inline std::vector<xg::Tensor> module_twin_inputs(const xg::nn::Module& m, const xg::Tensor& x,
                                                  const std::set<std::string>& not_compared = {}) {
    std::vector<xg::Tensor> in{x};
    for (const auto& [name, p] : m.named_parameters()) in.emplace_back(p.value(), xg::kFloat64, not_compared.count(name) == 0);
    return in;
}

/// A module's forward as a twin sees it: its outputs from its one input.
using ModuleForward = std::function<std::vector<xg::Tensor>(xg::nn::Module&, const xg::Tensor&)>;

/// The plain call m(x), the forward of most module twins.
inline std::vector<xg::Tensor> call_module(xg::nn::Module& m, const xg::Tensor& x) { return {m(x)}; }

/// The twin of module `m` at input x: module_twin(m, forward) on module_twin_inputs(m, x, not_compared),
/// so its parameters' gradients are compared too.
inline NnTwin module_nn_twin(std::string name, std::shared_ptr<xg::nn::Module> m, const xg::Tensor& x, double condition,
                             ModuleForward forward = call_module, const std::set<std::string>& not_compared = {}) {
    std::vector<xg::Tensor> inputs = module_twin_inputs(*m, x, not_compared);
    return {std::move(name), module_twin(std::move(m), std::move(forward)), std::move(inputs), condition};
}

/// The names every area's twin file uses, for `using namespace xg_test_support::nn_twin_names;`.
namespace nn_twin_names {
namespace F = xg::nn::functional;
using xg::Tensor;
using Inputs = std::vector<xg::Tensor>;
using xg_test_support::module_nn_twin;
using xg_test_support::NnTwinList;
using xg_test_support::twin_leaf;
}  // namespace nn_twin_names

}  // namespace xg_test_support
