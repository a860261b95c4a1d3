// Which kernels the fused ops run. Every fused op (the norms, GELU, DyT, softmax/cross-entropy,
// convolution and pooling, the recurrent cells) has two implementations with one signature:
//   reference  nn/reference/ (core/reference/ for softmax): plain loops over contiguous rows
//              whose bodies are the formulas of docs/derivations/<op>.md, with the same
//              symbols. What a learner reads.
//   fast       nn/fast/ (core/fast/): the same results with the speed machinery (kernel clones,
//              streaming stores, prefetch, thread splits, libmvec). Tested against the
//              reference (`ctest -L tiers`); a learner never has to read it.
// The fast tier is the default. XGRAD_REFERENCE_KERNELS=1 in the environment at start runs
// everything on the reference tier (the whole test suite passes that way too).
#pragma once

#include <utility>

namespace xg {

enum class KernelTier { reference, fast };

/// The tier the fused ops run now. Until set_kernel_tier is called: the reference tier when the
/// environment variable XGRAD_REFERENCE_KERNELS is "1", the fast tier when it is unset, empty or
/// "0"; any other value makes this throw xg::Error naming the variable and its value.
KernelTier kernel_tier();

/// Switches the tier of the fused ops run from now on (between ops, not inside one): for tests
/// that compare the tiers and for benchmarks.
void set_kernel_tier(KernelTier tier);

/// Runs the fused ops of its scope on `tier`, then restores the tier before it.
class KernelTierGuard {
public:
    explicit KernelTierGuard(KernelTier tier) : before_(kernel_tier()) { set_kernel_tier(tier); }
    ~KernelTierGuard() { set_kernel_tier(before_); }
    KernelTierGuard(const KernelTierGuard&) = delete;
    KernelTierGuard& operator=(const KernelTierGuard&) = delete;

private:
    KernelTier before_;
};

namespace detail {

/// The tier `text` (the value of XGRAD_REFERENCE_KERNELS) asks for: fast for null, "" or "0",
/// reference for "1" (surrounding spaces allowed); anything else throws xg::Error naming the
/// variable and the text.
KernelTier parse_kernel_tier(const char* text);

/// How an op calls its kernels: reference(args...) on the reference tier, fast(args...) otherwise,
///   by_tier(reference::layer_norm_forward, fast::layer_norm_forward, x, w, b, ...)
/// Both kernels must have the same type (one Kernel is deduced from both), so the tiers cannot
/// drift apart in their signatures.
template <class Kernel, class... Args>
decltype(auto) by_tier(Kernel& reference, Kernel& fast, Args&&... args) {
    return kernel_tier() == KernelTier::reference ? reference(std::forward<Args>(args)...)
                                                  : fast(std::forward<Args>(args)...);
}

}  // namespace detail

}  // namespace xg
