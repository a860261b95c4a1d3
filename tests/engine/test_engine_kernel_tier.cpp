// The switch between the kernel tiers (core/engine/kernel_tier.hpp).
#include <catch2/catch.hpp>

#include "core/engine/kernel_tier.hpp"
#include "core/engine/tensor.hpp"

namespace xg_test_engine_kernel_tier {

using Catch::Matchers::Contains;
using xg::KernelTier;

TEST_CASE("XGRAD_REFERENCE_KERNELS: 1 picks the reference tier, unset, empty or 0 the fast one", "[tiers]") {
    CHECK(xg::detail::parse_kernel_tier(nullptr) == KernelTier::fast);
    CHECK(xg::detail::parse_kernel_tier("") == KernelTier::fast);
    CHECK(xg::detail::parse_kernel_tier("0") == KernelTier::fast);
    CHECK(xg::detail::parse_kernel_tier(" 1 ") == KernelTier::reference);
    for (const char* bad : {"yes", "2", "true", "1x", "-1"}) {
        INFO(bad);
        CHECK_THROWS_WITH(xg::detail::parse_kernel_tier(bad),
                          Contains("XGRAD_REFERENCE_KERNELS") && Contains(bad));
    }
}

TEST_CASE("KernelTierGuard switches the tier for its scope and restores it", "[tiers]") {
    const KernelTier before = xg::kernel_tier();
    {
        const xg::KernelTierGuard guard(KernelTier::reference);
        CHECK(xg::kernel_tier() == KernelTier::reference);
        {
            const xg::KernelTierGuard inner(KernelTier::fast);
            CHECK(xg::kernel_tier() == KernelTier::fast);
        }
        CHECK(xg::kernel_tier() == KernelTier::reference);
    }
    CHECK(xg::kernel_tier() == before);
}

}  // namespace xg_test_engine_kernel_tier
