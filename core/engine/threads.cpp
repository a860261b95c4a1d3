#include "core/engine/threads.hpp"

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <mutex>
#include <string>
#include <string_view>

#include <fmt/format.h>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "core/engine/tensor.hpp"

// OpenBLAS's own setter, declared here (its header is not needed for one function). Weak: with
// another BLAS it is absent and null.
extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace xg {

namespace {

std::atomic<int> g_threads{0};  // 0: not resolved yet
std::once_flag g_thread_count_resolved;

// OMP_NUM_THREADS belongs to libgomp, which has its own rules (a list per nesting level, "2,1")
// and warns about a value it cannot read; xgrad takes the first entry when it is a valid count.
int omp_count() {
    const char* s = std::getenv("OMP_NUM_THREADS");
    if (s == nullptr || *s == '\0') return 0;
    char* end = nullptr;
    const long n = std::strtol(s, &end, 10);
    return end != s && n > 0 && n <= kMaxThreads ? static_cast<int>(n) : 0;
}

// The matrix products follow xgrad's count by running on xgrad's threads, in fixed blocks of one
// one-thread OpenBLAS call each (core/ops/gemm.cpp): OpenBLAS's own split would change the bits with
// the thread count. So OpenBLAS itself stays on one thread, whatever OPENBLAS_NUM_THREADS says.
void apply(int n) {
    g_threads.store(n, std::memory_order_relaxed);
    if (openblas_set_num_threads != nullptr) openblas_set_num_threads(1);
}

}  // namespace

namespace detail {

int parse_thread_count(const char* variable, const char* text) {
    if (text == nullptr || *text == '\0') return 0;
    std::string_view s(text);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    long n = 0;
    bool whole = !s.empty() && s.size() <= 9;
    for (char c : s) {
        if (c < '0' || c > '9') whole = false;
        if (whole) n = n * 10 + (c - '0');
    }
    if (!whole || n < 1 || n > kMaxThreads) {
        fail(variable, fmt::format("'{}' is not a thread count: give a whole number from 1 to {}, or unset it to use "
                                   "every core",
                                   text, kMaxThreads));
    }
    return static_cast<int>(n);
}

int thread_count_from_environment() {
    if (const int n = parse_thread_count("XGRAD_NUM_THREADS", std::getenv("XGRAD_NUM_THREADS"))) return n;
    if (const int n = omp_count()) return n;
#if defined(_OPENMP)
    return omp_get_num_procs();  // the cores of this process's affinity mask
#else
    return 1;
#endif
}

}  // namespace detail

void set_num_threads(int n) {
    if (n < 1 || n > kMaxThreads) {
        fail("set_num_threads", fmt::format("the number of threads must be from 1 to {}, got {}", kMaxThreads, n));
    }
    std::call_once(g_thread_count_resolved, [] {});  // a later get_num_threads must not reset it from the environment
    apply(n);
}

int get_num_threads() {
    // A bad XGRAD_NUM_THREADS throws out of call_once, which leaves the count unresolved: every
    // later call throws the same error, until set_num_threads resolves it.
    std::call_once(g_thread_count_resolved, [] { apply(detail::thread_count_from_environment()); });
    return g_threads.load(std::memory_order_relaxed);
}

}  // namespace xg
