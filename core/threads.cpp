#include "core/threads.hpp"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>

#include <fmt/format.h>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "core/tensor.hpp"

// OpenBLAS's own setter, declared here (its header is not needed for one function). Weak: with
// another BLAS it is absent and null.
extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace xg {

namespace {

std::atomic<int> g_threads{0};  // 0: not resolved yet
std::once_flag g_resolved;

// A positive integer from the environment variable `name`, or 0 (unset or not a count).
int env_count(const char* name) {
    const char* s = std::getenv(name);
    if (s == nullptr || *s == '\0') return 0;
    char* end = nullptr;
    const long n = std::strtol(s, &end, 10);  // OMP_NUM_THREADS may list counts per level: "2,1"
    return end != s && n > 0 && n <= 4096 ? static_cast<int>(n) : 0;
}

int default_count() {
    if (const int n = env_count("XGRAD_NUM_THREADS")) return n;
    if (const int n = env_count("OMP_NUM_THREADS")) return n;
#if defined(_OPENMP)
    return omp_get_num_procs();  // the cores of this process's affinity mask
#else
    return 1;
#endif
}

// The matrix products follow xgrad's count by running on xgrad's threads, in fixed blocks of one
// one-thread OpenBLAS call each (core/gemm.cpp): OpenBLAS's own split would change the bits with
// the thread count. So OpenBLAS itself stays on one thread, whatever OPENBLAS_NUM_THREADS says.
void apply(int n) {
    g_threads.store(n, std::memory_order_relaxed);
    if (openblas_set_num_threads != nullptr) openblas_set_num_threads(1);
}

}  // namespace

void set_num_threads(int n) {
    if (n < 1) fail("set_num_threads", fmt::format("the number of threads must be at least 1, got {}", n));
    std::call_once(g_resolved, [] {});  // a later get_num_threads must not reset it from the environment
    apply(n);
}

int get_num_threads() {
    std::call_once(g_resolved, [] { apply(default_count()); });
    return g_threads.load(std::memory_order_relaxed);
}

}  // namespace xg
