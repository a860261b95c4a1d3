// How many threads xgrad's kernels use. Results do not depend on it: every kernel gives the same
// bits at any thread count (docs/performance.md, "Threads and determinism").
#pragma once

namespace xg {

/// The most threads xgrad accepts, from set_num_threads or the environment (a bound that catches
/// typos such as 40000, far above any machine's cores).
constexpr int kMaxThreads = 4096;

/// Sets the number of threads of xgrad's kernels and matrix products (1 <= n <= kMaxThreads;
/// otherwise throws xg::Error). Like torch::set_num_threads; call it between ops, not inside one.
/// The products run on these threads in fixed blocks, each one single-threaded OpenBLAS call
/// (OpenBLAS's own threads would change the bits with the count), so OpenBLAS is kept at one
/// thread.
void set_num_threads(int n);

/// The number of threads xgrad's kernels use. Until set_num_threads is called: the environment
/// variable XGRAD_NUM_THREADS, else OMP_NUM_THREADS, else every core the process may run on. A
/// set XGRAD_NUM_THREADS that is not a whole number from 1 to kMaxThreads ("abc", "0", "1.5",
/// "2abc") makes this throw xg::Error naming the variable and its value, and so does every
/// kernel that asks for the count, until the variable is fixed or set_num_threads is called.
int get_num_threads();

namespace detail {

/// The count `text` (the value of environment variable `variable`) asks for: 0 when it is null or
/// empty (unset), else a whole number from 1 to kMaxThreads, with surrounding spaces allowed.
/// Anything else throws xg::Error naming the variable and the text.
int parse_thread_count(const char* variable, const char* text);

/// What get_num_threads starts from, read from the environment now: XGRAD_NUM_THREADS (strict,
/// parse_thread_count), else the first entry of OMP_NUM_THREADS when it is a valid count (libgomp
/// itself warns about an invalid one), else the cores of the process's affinity mask.
int thread_count_from_environment();

}  // namespace detail

}  // namespace xg
