// Internal to nn/: how a fused op calls its kernels. Every kernel exists twice with one signature,
// xg::nn::reference::f (nn/reference/: plain loops, the formulas of docs/derivations/) and
// xg::nn::fast::f (nn/fast/: the same results with threads, clones and streaming stores);
// xg::detail::by_tier (core/engine/kernel_tier.hpp, which core's softmax uses too) picks one.
#pragma once

#include "core/engine/kernel_tier.hpp"

namespace xg::nn::detail {

using xg::detail::by_tier;

}  // namespace xg::nn::detail
