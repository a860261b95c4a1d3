#include "core/engine/kernel_tier.hpp"

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <mutex>
#include <string_view>

#include <fmt/format.h>

#include "core/engine/tensor.hpp"

namespace xg {

namespace {

std::atomic<KernelTier> g_tier{KernelTier::fast};
std::once_flag g_tier_resolved;

}  // namespace

namespace detail {

KernelTier parse_kernel_tier(const char* text) {
    if (text == nullptr) return KernelTier::fast;
    std::string_view s(text);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    if (s.empty() || s == "0") return KernelTier::fast;
    if (s == "1") return KernelTier::reference;
    fail("XGRAD_REFERENCE_KERNELS",
         fmt::format("'{}' is not a switch: give 1 for the reference kernels, 0 (or unset it) for the fast ones", text));
}

}  // namespace detail

KernelTier kernel_tier() {
    // A bad value throws out of call_once, which leaves the tier unresolved: every later call
    // throws the same error, until set_kernel_tier resolves it.
    std::call_once(g_tier_resolved, [] { g_tier.store(detail::parse_kernel_tier(std::getenv("XGRAD_REFERENCE_KERNELS"))); });
    return g_tier.load(std::memory_order_relaxed);
}

void set_kernel_tier(KernelTier tier) {
    std::call_once(g_tier_resolved, [] {});  // a later kernel_tier must not reset it from the environment
    g_tier.store(tier, std::memory_order_relaxed);
}

}  // namespace xg
