// Internal to nn/: how a fused op calls its kernels. Every kernel exists twice with one signature,
// xg::nn::reference::f (nn/reference/: plain loops, the formulas of docs/derivations/) and
// xg::nn::fast::f (nn/fast/: the same results with threads, clones and streaming stores);
// core/engine/kernel_tier.hpp says which one runs.
#pragma once

#include <utility>

#include "core/engine/kernel_tier.hpp"

namespace xg::nn::detail {

/// reference(args...) on the reference tier, fast(args...) otherwise:
///   by_tier(reference::layer_norm_forward, fast::layer_norm_forward, x, w, b, ...)
/// Both kernels must have the same type (one Kernel is deduced from both), so the tiers cannot
/// drift apart in their signatures.
template <class Kernel, class... Args>
decltype(auto) by_tier(Kernel& reference, Kernel& fast, Args&&... args) {
    return xg::kernel_tier() == xg::KernelTier::reference ? reference(std::forward<Args>(args)...)
                                                          : fast(std::forward<Args>(args)...);
}

}  // namespace xg::nn::detail
