// Internal: XG_KERNEL_CLONES compiles a kernel twice, for baseline x86-64 (SSE2) and for AVX2, and
// the dynamic loader picks one per machine (GCC function multi-versioning, an ifunc). The clones
// round like the plain build: the AVX2 clone has no FMA to contract into, and ISO -std=c++17 means
// -ffp-contract=off; tests/clones checks it (ctest -L kernels). Used by nn/fast, core/fast/softmax.cpp and
// optim's Adam.
#pragma once

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(XGRAD_NO_KERNEL_CLONES)
#define XG_KERNEL_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define XG_KERNEL_CLONES
#endif
// For the loops a clone calls: GCC does not inline a large default-target function into an AVX2
// clone by itself, and an out-of-line copy runs with SSE2 only.
#if defined(__GNUC__)
#define XG_KERNEL_INLINE inline __attribute__((always_inline))
#else
#define XG_KERNEL_INLINE inline
#endif
