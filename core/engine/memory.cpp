#include "core/engine/memory.hpp"

#include <cstdint>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace xg::detail {

void advise_huge_pages(void* data, std::size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    constexpr std::size_t kLarge = std::size_t{32} << 20, kHuge = std::size_t{2} << 20;
    if (bytes < kLarge) return;
    // madvise wants whole pages: advise the 2 MiB-aligned part inside the block.
    const auto begin = reinterpret_cast<std::uintptr_t>(data);
    const std::uintptr_t first = (begin + kHuge - 1) / kHuge * kHuge, last = (begin + bytes) / kHuge * kHuge;
    if (last > first) (void)madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);  // advice: result ignored
#else
    (void)data, (void)bytes;
#endif
}

}  // namespace xg::detail
