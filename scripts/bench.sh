#!/usr/bin/env bash
# The xgrad vs libtorch benchmark of docs/performance.md, in one command:
#
#   scripts/bench.sh                 # both tables: glibc's default allocation, then kernel-only
#   scripts/bench.sh --cpu-time      # both tables timed with thread CPU time (a busy machine)
#   scripts/bench.sh --threads=2     # both tables, both sides on 2 threads (xg::set_num_threads,
#                                    #   torch::set_num_threads, OpenBLAS) - wall clock only
#   scripts/bench.sh --quick         # any xgrad_bench options: --quick, --cpu-time, --filter=LayerNorm,
#                                    #   --no-torch, --mmap-threshold=<bytes> (one run only, unless
#                                    #   the options are only --quick and --cpu-time)
#   scripts/bench.sh --data-parallel # the data-parallel row: the MLP step on 1 and 2 ranks (mpiexec) and
#                                    #   all_reduce bandwidth, then PyTorch's DDP over gloo (/usr/bin/python3,
#                                    #   scripts/bench_ddp_torch.py) as the reference; builds in build/
#
# Installs libtorch-dev if it is missing (apt-get; root or sudo), configures a separate build
# directory ($XGRAD_BENCH_BUILD_DIR, default build-bench/) with -DXGRAD_BUILD_BENCH=ON, builds
# the xgrad_bench target and runs it single-threaded (OPENBLAS_NUM_THREADS=1; the benchmark
# itself calls xg::set_num_threads(1) and torch::set_num_threads(1)), or on N threads with --threads=N. Wall-clock timings need a quiet machine: it warns when
# the 1-minute load average is above 0.5 (--cpu-time then leaves out the time spent waiting for a core).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${XGRAD_BENCH_BUILD_DIR:-$root/build-bench}

if [[ " $* " == *" --data-parallel "* ]]; then
  dp_build=${XGRAD_DP_BENCH_BUILD_DIR:-$root/build}
  cmake -S "$root" -B "$dp_build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$dp_build" -j2 --target xgrad_bench_data_parallel
  export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 XGRAD_NUM_THREADS=1
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # as root (CI)
  for ranks in 1 2; do
    echo "bench.sh: $ranks rank(s), load average $(cut -d' ' -f1-3 /proc/loadavg)"
    mpiexec --oversubscribe --bind-to none -np "$ranks" "$dp_build/tests/xgrad_bench_data_parallel"
  done
  if /usr/bin/python3 -c "import torch.distributed as d; assert d.is_available() and d.is_gloo_available()" 2>/dev/null; then
    for ranks in 1 2; do /usr/bin/python3 "$root/scripts/bench_ddp_torch.py" "$ranks"; done
  else
    echo "bench.sh: Debian's python3-torch has no torch.distributed with gloo here: no PyTorch reference"
  fi
  exit 0
fi

if ! dpkg -s libtorch-dev >/dev/null 2>&1; then
  sudo=""
  [[ $(id -u) -ne 0 ]] && sudo=sudo
  echo "bench.sh: installing libtorch-dev (the benchmark's reference; optional for xgrad itself)"
  $sudo apt-get update && $sudo apt-get install -y libtorch-dev
fi

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DXGRAD_BUILD_BENCH=ON >/dev/null
cmake --build "$build" -j2 --target xgrad_bench

load=$(cut -d' ' -f1 /proc/loadavg)
if awk -v l="$load" 'BEGIN { exit !(l > 0.5) }'; then
  echo "bench.sh: warning: load average $load > 0.5 - other processes share the cores; wall-clock timings will be noisy (--cpu-time helps)" >&2
fi

threads=1
for option in "$@"; do
  [[ $option == --threads=* ]] && threads=${option#--threads=}
done
export OPENBLAS_NUM_THREADS=$threads OMP_NUM_THREADS=$threads XGRAD_NUM_THREADS=$threads
bench=$build/tests/bench/xgrad_bench
for option in "$@"; do
  [[ $option == --quick || $option == --cpu-time || $option == --threads=* ]] || exec "$bench" "$@"
done
"$bench" "$@"
echo
echo "---- kernel-only: large buffers recycled from the heap for both sides (no mmap page faults) ----"
"$bench" "$@" --mmap-threshold=1073741824
