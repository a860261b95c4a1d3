// Internal to the library: how op outputs get their memory (core/engine/tensor.cpp's empty_array).
#pragma once

#include <cstddef>

namespace xg::detail {

/// Asks the kernel to back the `bytes` at `data` with transparent huge pages (2 MiB) when the
/// block is at least 32 MiB, before anything touches it. glibc maps a block this large fresh on
/// every allocation, and the kernel would otherwise fault it in and zero it 4 KiB at a time
/// (8192 faults per 32 MiB; docs/performance.md, "Allocation"). Advice only: where transparent
/// huge pages are off, or on other systems, nothing changes.
void advise_huge_pages(void* data, std::size_t bytes);

}  // namespace xg::detail
