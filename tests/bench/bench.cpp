// xgrad vs libtorch, one process, interleaved: for every workload both sides run the same work
// on the same values (double precision, one thread), alternating which goes first, and the table
// shows the median of many calls after a warm-up. A STREAM-style triad measured in the same run
// gives the memory bandwidth the bandwidth-bound kernels are compared against.
//
//   xgrad_bench [--quick] [--filter=<substring>] [--no-torch] [--mmap-threshold=<bytes>] [--cpu-time] [--threads=N]
//
// --threads=N runs both sides on N threads: xg::set_num_threads(N) and torch::set_num_threads(N)
// (default 1). With N > 1 the wall clock is the only fair clock, so --cpu-time is refused; the
// training steps' target is then 0.9 instead of 1.0 (issue 18).
//
// --cpu-time times each call with the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID)
// instead of the wall clock: on a machine shared with other work it leaves out the time the
// thread waits for a core. Both sides run every call on this thread (OpenBLAS and libtorch on
// one thread, libtorch's CPU autograd on the caller's thread); the table's footer reports the
// process's CPU time outside this thread, which shows whether that held.
//
// --mmap-threshold calls mallopt(M_MMAP_THRESHOLD) for the whole process (both sides), so large
// buffers are recycled from the heap instead of being fresh, zero-filled mmap'd pages each call:
// the difference to a default run is the page-fault cost (see docs/performance.md).
// Run it through scripts/bench.sh, which sets OPENBLAS_NUM_THREADS=1.
#include <dlfcn.h>
#include <time.h>
#include <malloc.h>
#include <omp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/engine/threads.hpp"
#include "tests/bench/bench.hpp"

#ifndef XGRAD_BENCH_FLAGS
#define XGRAD_BENCH_FLAGS "?"
#endif

namespace xg::bench {

namespace {
int g_threads = 1;
}  // namespace

int bench_threads() { return g_threads; }

std::vector<double> bench_data(std::size_t n, unsigned seed) {
    std::mt19937_64 engine(seed);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<double> v(n);
    for (double& x : v) x = normal(engine);
    return v;
}

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
    bool quick = false, torch = true, cpu_time = false;
    std::string filter;
    long mmap_threshold = 0;
    int threads = 1;
};

struct Sample {
    double seconds = 0.0;
    long faults = 0;  // minor page faults during the call
};

long minor_faults() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
}

double cpu_seconds(clockid_t clock) {
    timespec ts{};
    clock_gettime(clock, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// CPU time the process spent outside the timed thread during the timed calls (summed).
double g_other_threads_cpu = 0.0;
bool g_cpu_time = false;

Sample time_call(const Run& run) {
    const long f0 = minor_faults();
    const double thread0 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID), process0 = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID);
    const auto t0 = Clock::now();
    run();
    const auto t1 = Clock::now();
    const double thread = cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - thread0;
    g_other_threads_cpu += cpu_seconds(CLOCK_PROCESS_CPUTIME_ID) - process0 - thread;
    return {g_cpu_time ? thread : std::chrono::duration<double>(t1 - t0).count(), minor_faults() - f0};
}

template <class T, class Get>
double median_of(const std::vector<T>& samples, Get get) {
    std::vector<double> v;
    for (const T& s : samples) v.push_back(static_cast<double>(get(s)));
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n == 0 ? 0.0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

// STREAM triad a = b + s c over three 128 MiB arrays (4x the L3 of any machine we run on);
// counted as STREAM does: 3 x 8 bytes per element (2 reads, 1 write; no write-allocate). Timed
// with the same clock as the table, on the table's threads (each a contiguous block, as the
// kernels split their rows), so that a 2-thread %triad compares with what both cores stream.
double triad_bandwidth(int repetitions) {
    const std::size_t n = std::size_t{1} << 24;
    std::vector<double> a(n, 0.0), b(n, 1.0), c(n, 2.0);
    double best = 0.0;
    for (int r = 0; r < repetitions; ++r) {
        const double s = 3.0 + r;
        const auto t0 = Clock::now();
        const double cpu0 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
        double* pa = a.data();
        const double *pb = b.data(), *pc = c.data();
#pragma omp parallel num_threads(g_threads)
        {
            const auto t = static_cast<std::size_t>(omp_get_thread_num()), count = static_cast<std::size_t>(omp_get_num_threads());
#pragma omp simd
            for (std::size_t i = n * t / count; i < n * (t + 1) / count; ++i) pa[i] = pb[i] + s * pc[i];
        }
        const double t = g_cpu_time ? cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - cpu0
                                    : std::chrono::duration<double>(Clock::now() - t0).count();
        best = std::max(best, 3.0 * 8.0 * static_cast<double>(n) / t);
    }
    if (a[n / 2] < 0.0) std::puts("");  // keep the loop observable
    return best;
}

std::string cpu_model() {
    std::ifstream in("/proc/cpuinfo");
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
    }
    return "unknown CPU";
}

std::string blas_description() {
    using ConfigFn = char* (*)();
    if (auto f = reinterpret_cast<ConfigFn>(dlsym(RTLD_DEFAULT, "openblas_get_config"))) return f();
    return "BLAS (not OpenBLAS)";
}

std::vector<Workload> workloads() {
    const auto stream5 = [](double elements) { return 5.0 * 8.0 * elements; };  // read x, write y; read x, dy, write dx
    // BatchNorm's statistics span the whole batch, so each pass must end before the next begins: the
    // forward reads x twice (sums, then y) and the backward reads x and dy twice (sums, then dx).
    const auto stream8 = [](double elements) { return 8.0 * 8.0 * elements; };
    return {
        {Kind::layer_norm, "LayerNorm fwd+bwd (4096, 768)", {4096, 768}, 0.75, stream5(4096.0 * 768)},
        {Kind::layer_norm, "LayerNorm fwd+bwd (16384, 256)", {16384, 256}, 0.75, stream5(16384.0 * 256)},
        {Kind::layer_norm, "LayerNorm fwd+bwd (64, 1024)", {64, 1024}, 0.75, stream5(64.0 * 1024)},
        {Kind::batch_norm, "BatchNorm1d train fwd+bwd (4096, 768)", {4096, 768}, 0.75, stream8(4096.0 * 768)},
        {Kind::gelu, "GELU exact fwd+bwd (4096, 768)", {4096, 768}, 0.75, stream5(4096.0 * 768)},
        {Kind::linear, "Linear fwd+bwd 64 x 784->256", {64, 784, 256}, 1.05},
        {Kind::linear, "Linear fwd+bwd 4096 x 256->256", {4096, 256, 256}, 1.05},
        {Kind::mlp_layer_norm, "MLP step 784-256-256-10 LN+GELU, b64", {64}, 1.0},
        {Kind::mlp_batch_norm, "MLP step 784-256-256-10 BN+GELU, b64", {64}, 1.0},
        {Kind::transformer_block, "Pre-LN block d128 h4 T64 B16 fwd+bwd", {16, 64, 128, 4}, 1.0},
        {Kind::conv2d, "Conv2d fwd+bwd N32 16->32 28x28 k3 p1", {32, 16, 32, 28, 28, 3, 1}, 1.2},
        {Kind::lstm, "LSTM fwd+bwd B32 I64 H128 T32", {32, 32, 64, 128}, 1.0},
        {Kind::group_norm, "GroupNorm fwd+bwd (32, 32, 28, 28) G8", {32, 32, 28, 28, 8}, 0.75, stream5(32.0 * 32 * 28 * 28)},
        // Issue 18's other rows, after the first ones so that those keep their heap history. libtorch
        // 1.13 has no fused RMSNorm: its side is what a 1.13 user writes (x * rsqrt(mean(x^2) + eps) * w).
        {Kind::rms_norm, "RMSNorm fwd+bwd (4096, 768)", {4096, 768}, 0.75, stream5(4096.0 * 768)},
        {Kind::rms_norm, "RMSNorm fwd+bwd (16384, 256)", {16384, 256}, 0.75, stream5(16384.0 * 256)},
        {Kind::batch_norm, "BatchNorm1d train fwd+bwd (16384, 256)", {16384, 256}, 0.75, stream8(16384.0 * 256)},
        // A LayerNorm a user writes with ops (mean, var, broadcasting; sum_to in backward) on both
        // sides: the graph of small ops, not a fused kernel.
        {Kind::layer_norm_by_hand, "LayerNorm by hand (ops) fwd+bwd (1024, 768)", {1024, 768}, 1.0},
        // Issue 28's float32 rows against libtorch in float32: half the bytes of float64.
        {Kind::layer_norm, "LayerNorm fwd+bwd (4096, 768), float32", {4096, 768}, 0.75, stream5(4096.0 * 768) / 2, true},
        {Kind::rms_norm, "RMSNorm fwd+bwd (4096, 768), float32", {4096, 768}, 0.75, stream5(4096.0 * 768) / 2, true},
        {Kind::gelu, "GELU exact fwd+bwd (4096, 768), float32", {4096, 768}, 0.75, stream5(4096.0 * 768) / 2, true},
        {Kind::batch_norm, "BatchNorm1d train fwd+bwd (4096, 768), float32", {4096, 768}, 0.75, stream8(4096.0 * 768) / 2, true},
        {Kind::linear, "Linear fwd+bwd 64 x 784->256, float32", {64, 784, 256}, 1.05, 0.0, true},
        {Kind::linear, "Linear fwd+bwd 4096 x 256->256, float32", {4096, 256, 256}, 1.05, 0.0, true},
        // Issue 42: the float32 steps at 0.95 (at 2 threads the steps' 0.9 below applies).
        {Kind::mlp_layer_norm, "MLP step 784-256-256-10 LN+GELU, b64, float32", {64}, 0.95, 0.0, true},
        {Kind::transformer_block, "Pre-LN block d128 h4 T64 B16 fwd+bwd, float32", {16, 64, 128, 4}, 0.95, 0.0, true},
    };
}

struct Result {
    double xgrad = 0.0, torch = 0.0;  // median seconds
    double xgrad_faults = 0.0, torch_faults = 0.0;
    std::size_t calls = 0;
};

Result measure(const Workload& w, const Options& o) {
    const Run xg_run = make_xgrad_run(w);
    Run torch_run;
#ifdef XGRAD_BENCH_HAVE_TORCH
    if (o.torch) torch_run = make_torch_run(w);
#endif
    // Warm-up: first calls pay for lazy initialisation and for growing the heap.
    double warm = 0.0;
    for (int i = 0; i < 3; ++i) {
        warm = time_call(xg_run).seconds;
        if (torch_run) warm = std::max(warm, time_call(torch_run).seconds);
    }
    const double budget = o.quick ? 0.4 : 2.0;  // seconds per side
    const std::size_t calls = std::clamp<std::size_t>(static_cast<std::size_t>(budget / std::max(warm, 1e-6)), 11, 501);
    std::vector<Sample> xs, ts;
    for (std::size_t i = 0; i < calls; ++i) {
        if (i % 2 == 0 || !torch_run) {  // alternate who goes first so neither always runs on a warm cache
            xs.push_back(time_call(xg_run));
            if (torch_run) ts.push_back(time_call(torch_run));
        } else {
            ts.push_back(time_call(torch_run));
            xs.push_back(time_call(xg_run));
        }
    }
    const auto secs = [](const Sample& s) { return s.seconds; };
    const auto faults = [](const Sample& s) { return s.faults; };
    return {median_of(xs, secs), median_of(ts, secs), median_of(xs, faults), median_of(ts, faults), calls};
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--quick") o.quick = true;
        else if (a == "--no-torch") o.torch = false;
        else if (a == "--cpu-time") o.cpu_time = true;
        else if (a.rfind("--filter=", 0) == 0) o.filter = a.substr(9);
        else if (a.rfind("--mmap-threshold=", 0) == 0) o.mmap_threshold = std::stol(a.substr(17));
        else if (a.rfind("--threads=", 0) == 0) o.threads = std::max(1, std::stoi(a.substr(10)));
        else {
            fmt::print(stderr, "usage: xgrad_bench [--quick] [--filter=<substring>] [--no-torch] [--mmap-threshold=<bytes>] "
                               "[--cpu-time] [--threads=N]\n");
            std::exit(2);
        }
    }
    if (o.threads > 1 && o.cpu_time) {
        fmt::print(stderr, "xgrad_bench: --cpu-time counts the calling thread only; with --threads > 1 use the wall clock\n");
        std::exit(2);
    }
#ifndef XGRAD_BENCH_HAVE_TORCH
    o.torch = false;
#endif
    return o;
}

void print_machine(const Options& o) {
    const char* blas_threads = std::getenv("OPENBLAS_NUM_THREADS");
    fmt::print("machine: {} | {} cores online | g++ {} | flags: {}\n", cpu_model(), sysconf(_SC_NPROCESSORS_ONLN),
               __VERSION__, XGRAD_BENCH_FLAGS);
    fmt::print("blas: {} | OPENBLAS_NUM_THREADS={} | threads: {} (xg::set_num_threads; OpenBLAS follows)\n", blas_description(),
               blas_threads ? blas_threads : "(unset!)", o.threads);
#ifdef XGRAD_BENCH_HAVE_TORCH
    fmt::print("reference: {} (torch::set_num_threads({})){}\n", torch_description(), o.threads,
               o.torch ? "" : " - disabled by --no-torch");
#else
    fmt::print("reference: libtorch not found at configure time - xgrad figures only\n");
#endif
    if (o.mmap_threshold > 0) {
        fmt::print("allocation: mallopt(M_MMAP_THRESHOLD, {}) for the whole process (both sides)\n", o.mmap_threshold);
    } else {
        fmt::print("allocation: glibc defaults for both sides (see the notes under the table)\n");
    }
    fmt::print("clock: {}\n", o.cpu_time ? "thread CPU time per call (--cpu-time; excludes waiting for a core)"
                                          : "wall clock per call (steady_clock)");
}

}  // namespace

int run_main(int argc, char** argv) {
    const Options o = parse(argc, argv);
    g_cpu_time = o.cpu_time;
    g_threads = o.threads;
    xg::set_num_threads(o.threads);
    if (o.mmap_threshold > 0) {
        mallopt(M_MMAP_THRESHOLD, static_cast<int>(o.mmap_threshold));
        mallopt(M_TRIM_THRESHOLD, static_cast<int>(2 * o.mmap_threshold));
    }
    print_machine(o);
    double triad = triad_bandwidth(o.quick ? 5 : 20);
    fmt::print("triad bandwidth: {:.1f} GB/s on {} thread{} (best of the runs; 24 bytes per element)\n\n", triad / 1e9, g_threads,
               g_threads == 1 ? "" : "s");

    fmt::print("{:<40} {:>10} {:>10} {:>7} {:>7}  {:>12} {:>12} {:>13}\n", "workload (median per call)", "xgrad ms",
               "torch ms", "ratio", "target", "xgrad %triad", "torch %triad", "faults x / t");
    std::vector<std::pair<Workload, Result>> results;
    for (const Workload& w : workloads()) {
        if (!o.filter.empty() && w.name.find(o.filter) == std::string::npos) continue;
        Workload w_here = w;
        const bool training_step = w.kind == Kind::mlp_layer_norm || w.kind == Kind::mlp_batch_norm || w.kind == Kind::transformer_block;
        if (o.threads > 1 && training_step) w_here.target_ratio = std::min(w.target_ratio, 0.9);
        const Workload& w_run = w_here;
        const Result r = measure(w_run, o);
        results.emplace_back(w_run, r);
        const bool has_torch = r.torch > 0.0;
        const double ratio = has_torch ? r.xgrad / r.torch : 0.0;
        const std::string verdict = !has_torch ? "" : ratio <= w_run.target_ratio ? " ok" : " MISS";
        const auto pct = [&](double s) { return w.bytes > 0.0 ? fmt::format("{:.0f}%", 100.0 * w.bytes / s / triad) : std::string("-"); };
        fmt::print("{:<40} {:>10.3f} {:>10} {:>7} {:>7}  {:>12} {:>12} {:>6.0f} / {:<6}{}\n", w.name, r.xgrad * 1e3,
                   has_torch ? fmt::format("{:.3f}", r.torch * 1e3) : "-", has_torch ? fmt::format("{:.2f}", ratio) : "-",
                   fmt::format("{:.2f}", w_run.target_ratio), pct(r.xgrad), has_torch ? pct(r.torch) : "-", r.xgrad_faults,
                   has_torch ? fmt::format("{:.0f}", r.torch_faults) : "-", verdict);
        std::fflush(stdout);
    }
    triad = std::max(triad, triad_bandwidth(o.quick ? 3 : 10));
    fmt::print("\ntriad bandwidth re-measured after the table: best {:.1f} GB/s\n", triad / 1e9);
    fmt::print("CPU time of other threads of this process during the timed calls: {:.3f} s in all\n", g_other_threads_cpu);
    fmt::print("byte model (%triad): LayerNorm, RMSNorm, GELU, GroupNorm fwd+bwd must move 5 x rows x width x 8 bytes\n"
               "  (4 bytes in the float32 rows)\n"
               "  (forward reads x and writes y; backward reads x and dy and writes dx; per-row/per-channel vectors\n"
               "  ignored); BatchNorm 8 x (its statistics span the batch: x is read twice forward, x and dy twice\n"
               "  backward). Divided by the median time and by the triad bandwidth. (64, 1024) is cache-resident and\n"
               "  GroupNorm's 6.1 MiB arrays partly stay in the L3, so their %triad can exceed 100%.\n");
    fmt::print("faults x / t: median minor page faults per call (xgrad / libtorch); 8192 faults = one fresh 32 MiB buffer.\n"
               "allocation: xgrad - every Array is an xt::xarray<double> (std::allocator -> glibc malloc): a fresh buffer\n"
               "  per op output and per gradient, freed with the graph / when the gradient is reset. libtorch - c10's CPU\n"
               "  allocator (posix_memalign, 64-byte aligned -> glibc), no caching on CPU. glibc serves a request from a\n"
               "  free heap chunk when one fits, otherwise above the mmap threshold (dynamic, 128 KiB up to 32 MiB) with\n"
               "  fresh mmap'd pages that the kernel faults in and zeroes on first touch and unmaps on free. A 32 MiB\n"
               "  buffer (16384 x 256 doubles) is always above the threshold, so whoever finds no free heap chunk for it\n"
               "  pays ~8192 faults + zeroing per buffer per call: the faults column shows which side that was, and it\n"
               "  depends on the heap's history (workload order). --mmap-threshold=<big> makes both sides recycle.\n");
    return 0;
}

}  // namespace xg::bench

int main(int argc, char** argv) { return xg::bench::run_main(argc, argv); }
