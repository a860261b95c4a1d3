// Internal: how xgrad's kernels split work between threads (OpenMP), in two named helpers, so
// that a kernel says what it splits and its loop body stays the plain loop of the derivation.
//
//   parallel_for(n, cost, body)        body(begin, end) over [0, n), one contiguous block per thread
//   sums_over_chunks(n, cost, ...)     sums across items (dgamma, a channel's sum) in fixed chunks
//
// Bit-identical results at any thread count (docs/performance.md, "Threads and determinism"):
// parallel_for is only for work whose items are independent (a row's y, an element's update), so
// who computes an item does not change it. A sum across items is split into chunks by the size of
// the problem alone, never by the thread count; each chunk sums its items in order into its own
// partial, and the partials are added in chunk order. Threads only decide who computes which
// chunk, which changes no bit.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "core/engine/threads.hpp"

namespace xg::detail {

// Below this much work (elements touched) a kernel stays on the calling thread: waking the
// thread pool costs a few microseconds, as much as ~20 K elements of a streaming kernel.
constexpr std::size_t kParallelMinWork = std::size_t{1} << 15;

/// The threads to use for `n` items of `cost` elements each: 1 for small work, and inside a
/// parallel region.
inline int threads_for(std::size_t n, std::size_t cost) {
    if (n < 2 || n * cost < kParallelMinWork) return 1;
#if defined(_OPENMP)
    if (omp_in_parallel()) return 1;  // a kernel called from a thread's share (a conv's GEMMs) stays on it
#endif
    return static_cast<int>(std::min<std::size_t>(n, static_cast<std::size_t>(get_num_threads())));
}

/// How many threads run the current parallel region (1 outside one): a kernel may walk its share
/// differently when the other threads stream through memory at the same time, as long as that
/// changes no bit of what it computes.
inline int threads_in_this_region() {
#if defined(_OPENMP)
    return omp_get_num_threads();
#else
    return 1;
#endif
}

/// body(begin, end) for contiguous blocks covering [0, n) once, one block per thread. For items
/// that do not depend on each other; `cost` is the elements one item touches.
template <class Body>
void parallel_for(std::size_t n, std::size_t cost, Body&& body) {
    const int threads = threads_for(n, cost);
    if (threads <= 1) {
        if (n > 0) body(std::size_t{0}, n);
        return;
    }
#if defined(_OPENMP)
#pragma omp parallel num_threads(threads)
    {
        const auto t = static_cast<std::size_t>(omp_get_thread_num()), count = static_cast<std::size_t>(omp_get_num_threads());
        const std::size_t begin = n * t / count, end = n * (t + 1) / count;
        if (begin < end) body(begin, end);
    }
#else
    body(std::size_t{0}, n);
#endif
}

// A reduction is split into at most kMaxChunks chunks of at least kChunkWork elements each.
constexpr std::size_t kMaxChunks = 16;
constexpr std::size_t kChunkWork = std::size_t{1} << 15;

/// [0, n) in `count` contiguous chunks; count depends on n and the cost of an item only.
struct FixedChunks {
    std::size_t n = 0, count = 1;
    std::size_t begin(std::size_t i) const { return n * i / count; }
    std::size_t end(std::size_t i) const { return n * (i + 1) / count; }
};

inline FixedChunks fixed_chunks(std::size_t n, std::size_t cost) {
    const std::size_t by_work = (n * std::max<std::size_t>(cost, 1) + kChunkWork - 1) / kChunkWork;
    return {n, std::clamp<std::size_t>(by_work, 1, std::max<std::size_t>(std::min(n, kMaxChunks), 1))};
}

/// Two sums across the n items of a kernel, each a vector of `width` values: out_a[j] += the sum
/// over items of a_j, out_b[j] likewise (out_b may be null). body(begin, end, part_a, part_b)
/// adds the items [begin, end) in order into zeroed partials; the chunks' partials are then
/// added to out in chunk order, whatever thread computed them. Items may also write their own
/// outputs (a row's dx) in body.
template <class Body>
void sums_over_chunks(std::size_t n, std::size_t cost, std::size_t width, double* out_a, double* out_b, Body&& body) {
    const FixedChunks chunks = fixed_chunks(n, cost);
    std::vector<double> partials(chunks.count * 2 * width, 0.0);
    const auto part_a = [&](std::size_t i) { return partials.data() + i * 2 * width; };
    const auto part_b = [&](std::size_t i) { return partials.data() + i * 2 * width + width; };
    parallel_for(chunks.count, n * cost / chunks.count, [&](std::size_t first, std::size_t last) {
        for (std::size_t i = first; i < last; ++i) body(chunks.begin(i), chunks.end(i), part_a(i), part_b(i));
    });
    for (std::size_t i = 0; i < chunks.count; ++i) {
        const double *a = part_a(i), *b = part_b(i);
        for (std::size_t j = 0; j < width; ++j) out_a[j] += a[j];
        if (out_b != nullptr) {
            for (std::size_t j = 0; j < width; ++j) out_b[j] += b[j];
        }
    }
}

}  // namespace xg::detail
