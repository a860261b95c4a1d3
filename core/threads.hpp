// How many threads xgrad's kernels use. Results do not depend on it: every kernel gives the same
// bits at any thread count (docs/performance.md, "Threads and determinism").
#pragma once

namespace xg {

/// Sets the number of threads of xgrad's kernels and matrix products (n >= 1; otherwise throws
/// xg::Error). Like torch::set_num_threads; call it between ops, not inside one. The products run
/// on these threads in fixed blocks, each one single-threaded OpenBLAS call (OpenBLAS's own
/// threads would change the bits with the count), so OpenBLAS is kept at one thread.
void set_num_threads(int n);

/// The number of threads xgrad's kernels use. Until set_num_threads is called: the environment
/// variable XGRAD_NUM_THREADS, else OMP_NUM_THREADS, else every core the process may run on.
int get_num_threads();

}  // namespace xg
