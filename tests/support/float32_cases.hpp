// What the native float32 node tests of the fused ops share (tests/<norm>/test_<norm>_float32.cpp,
// issue 28 part 2): float32 x and parameters run the kernels on their float32 storage, so no tensor
// gets a float64 mirror in the forward or the backward, and the results are: on the reference tier,
// those of the float64 arithmetic on the same values, rounded once (bit for bit: the reference
// kernels widen every value read and sum in double); on the fast tier, within the bounds of the
// float arithmetic of the fast float32 kernels (float terms, double sums: docs/precision.md
// "Accumulators"; the bounds: FloatArithmeticConditions, tests/support/norm_tiers.hpp). Each test
// states its op, its inputs and its fast-tier bounds; these functions run the two routes.
#pragma once

#include <functional>
#include <vector>

#include <catch2/catch.hpp>

#include "core/engine/kernel_tier.hpp"
#include "core/engine/tensor.hpp"

namespace xg_test_support {

/// A fused op as these tests call it: its result from its leaves (x, then its parameters).
using Float32NodeOp = std::function<xg::Tensor(const std::vector<xg::Tensor>&)>;

/// Runs op on float32 leaves and backward from the float32 seed g: the result must be a native
/// float32 node, and no tensor (leaves, result, seed) may get a float64 mirror, forward or backward.
inline xg::Tensor run_native_float32_node(const Float32NodeOp& op, const std::vector<xg::Tensor>& leaves, const xg::Tensor& g) {
    const xg::Tensor y = op(leaves);
    REQUIRE(y.dtype() == xg::kFloat32);
    CHECK(y.node()->native);
    y.backward(g);
    std::vector<const xg::Tensor*> tensors;
    for (const xg::Tensor& t : leaves) tensors.push_back(&t);
    tensors.push_back(&y);
    tensors.push_back(&g);
    for (const xg::Tensor* t : tensors) {
        CHECK(t->node()->value_mirror == xg::Node::Mirror::None);
        CHECK(t->node()->grad_mirror == xg::Node::Mirror::None);
    }
    return y;
}

/// The float64 route on the values of float32 leaves and seed: float64 leaves requiring a
/// gradient, the op's result, and the backward from the widened seed.
struct Float64Route {
    std::vector<xg::Tensor> leaves;
    xg::Tensor y;
    xg::Array g;  ///< the widened seed
};

inline Float64Route float64_route(const Float32NodeOp& op, const std::vector<xg::Tensor>& leaves32, const xg::Tensor& g32) {
    Float64Route route;
    for (const xg::Tensor& t : leaves32) route.leaves.emplace_back(xg::to_float64_array(t.values<float>()), true);
    route.g = xg::to_float64_array(g32.values<float>());
    route.y = op(route.leaves);
    route.y.backward(xg::Tensor(route.g));
    return route;
}

/// The float32 result y and every float32 leaf's gradient are the float64 route's rounded once,
/// bit for bit (the kernels widen every value read and sum in double).
inline void check_float64_route_bits(const xg::Tensor& y, const std::vector<xg::Tensor>& leaves32, const Float64Route& route) {
    CHECK(y.values<float>() == xg::to_float32_array(route.y.value()));
    for (std::size_t i = 0; i < leaves32.size(); ++i) {
        INFO("gradient of leaf " << i);
        CHECK(leaves32[i].grad_values<float>() == xg::to_float32_array(route.leaves[i].grad_value()));
    }
}

/// A float32 x with a float64 parameter: the op promotes (PyTorch's rule) and takes the float64
/// route, not the native float32 node.
inline void check_mixed_dtypes_keep_float64_route(const Float32NodeOp& op, const std::vector<xg::Tensor>& leaves) {
    const xg::Tensor y = op(leaves);
    CHECK(y.dtype() == xg::result_dtype(leaves));
    CHECK_FALSE(y.node()->native);
}

/// One tier's run of a native node test: the float32 leaves (x, then the parameters, holding
/// their gradients), the float32 result, and the float64 route on the same values.
struct NativeFloat32Run {
    std::vector<xg::Tensor> leaves;
    xg::Tensor y;
    Float64Route route;
};

/// On the reference tier, then on the fast one: fresh float32 leaves holding the values of
/// `leaves` (x, then the parameters), run_native_float32_node from the seed g and the float64
/// route. The reference kernels must give the route's bits; `check_fast` states the bounds of the
/// fast kernels' float arithmetic.
inline void check_native_float32_node_on_tiers(const Float32NodeOp& op, const std::vector<xg::Array>& leaves, const xg::Array& g,
                                               const std::function<void(const NativeFloat32Run&)>& check_fast) {
    for (const xg::KernelTier tier : {xg::KernelTier::reference, xg::KernelTier::fast}) {
        const xg::KernelTierGuard guard(tier);
        NativeFloat32Run run;
        for (const xg::Array& a : leaves) run.leaves.emplace_back(a, xg::kFloat32, true);
        const xg::Tensor g32(g, xg::kFloat32);
        run.y = run_native_float32_node(op, run.leaves, g32);
        run.route = float64_route(op, run.leaves, g32);
        if (tier == xg::KernelTier::reference) {
            check_float64_route_bits(run.y, run.leaves, run.route);
        } else {
            check_fast(run);
        }
    }
}

}  // namespace xg_test_support
