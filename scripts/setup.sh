#!/usr/bin/env bash
# One entry point for a fresh Debian machine (run as root, or with sudo available):
#   scripts/setup.sh run    install what is missing, build the tutorials, run them (the main job):
#                           installs and the build go to <build>/setup.log (one line per phase
#                           here, the whole log on failure); each tutorial's banner and verdicts,
#                           a summary, and the HTML report <build>/tutorials/report/index.html
#   scripts/setup.sh test   install what is missing, build, run the whole test suite, run it
#                           again under a second OpenBLAS kernel (OPENBLAS_CORETYPE, see below)
#                           on the reference kernels (XGRAD_REFERENCE_KERNELS=1), then the
#                           sanitizer run below (skip it with XGRAD_SANITIZE_TESTS=0)
#   scripts/setup.sh sanitize  only the sanitizer run: the test executables built with
#                           AddressSanitizer + UBSan (-Og -g1) in build-asan (SANITIZE_DIR), and the
#                           ctest suite run under them, one process per area, except the tests that
#                           run_sanitized_suite (below) leaves out and says why
#   scripts/setup.sh build  install what is missing and build only
#   scripts/setup.sh docs   as build, plus Doxygen/Graphviz and the API reference (target `docs`)
#   scripts/setup.sh debug  a Debug build (-O0 -g) in build-debug, to step through a tutorial in gdb:
#                           gdb --args build-debug/tutorials/01_layernorm_by_hand --step
# BUILD_DIR (default: build, or build-debug for debug) and JOBS (default: nproc) may be set.
set -euo pipefail

cd "$(dirname "$0")/.."
mode="${1:-run}"
build_type=Release
[ "$mode" = debug ] && build_type=Debug
default_dir=build
[ "$mode" = debug ] && default_dir=build-debug
build_dir="${BUILD_DIR:-$default_dir}"
jobs="${JOBS:-$(nproc)}"

packages=(cmake make ninja-build g++ ccache
          xtensor-dev xtl-dev libxtensor-blas-dev libxsimd-dev libopenblas-dev
          catch2 libfmt-dev libzip-dev zipcmp zipmerge ziptool zlib1g-dev pkg-config
          gnuplot-nox dataset-fashion-mnist libcmark-gfm-dev libcmark-gfm-extensions-dev)
# Graphviz draws tutorial 05's graph pictures (run; test: the report checked in the browser shows
# them); Doxygen only the API reference (docs). cmark-gfm (above) renders the guides in the report.
if [ "$mode" = run ] || [ "$mode" = docs ] || [ "$mode" = test ]; then packages+=(graphviz); fi
if [ "$mode" = docs ]; then packages+=(doxygen); fi
if [ "$mode" = debug ]; then packages+=(gdb); fi
# The tests that need PyTorch run on every machine the test command runs on: the interop test (a
# model saved by xgrad loads into PyTorch) and the fixtures check (scripts/make_fixtures.py writes
# the committed fixtures byte for byte). Never needed to build or to run the tutorials.
if [ "$mode" = test ] || [ "$mode" = sanitize ]; then packages+=(python3-torch python3-numpy); fi
# Open MPI: xg::distributed, SyncBatchNorm, DDP, their tests (ctest -L distributed) and tutorial 18.
packages+=(openmpi-bin libopenmpi-dev)
# ctest -L browser loads the tutorial report in headless Chromium, driven from Debian's python3.
if [ "$mode" = test ]; then packages+=(chromium python3); fi

# The main job (run) reads as a lesson: package installs and the build go to a log, one line per
# phase here, and the whole log is printed when a phase fails. Other modes print everything.
mkdir -p "$build_dir"
log="$build_dir/setup.log"
quiet=0
if [ "$mode" = run ]; then
  quiet=1
  : > "$log"
  echo "setup: installs and the build are logged to $log"
fi
phase() {  # phase "what it does" command...
  local what="$1" start=$SECONDS rc=0
  shift
  if ((quiet == 0)); then "$@"; return; fi
  printf 'setup: %s ... ' "$what"
  "$@" >> "$log" 2>&1 || rc=$?
  if ((rc == 0)); then echo "done ($((SECONDS - start)) s)"; return; fi
  echo "FAILED (exit $rc); the whole log, $log:"
  cat "$log"
  exit "$rc"
}

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing missing Debian packages: ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  phase "apt-get update" "${sudo_cmd[@]}" apt-get update -qq
  phase "installing ${#missing[@]} packages" \
    "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"

# ctest with its output kept: a test that skips here is a test nobody runs, so a skipped test fails
# the command too (ctest lists it under "The following tests did not run").
ctest_no_skips() {
  local log
  log="$(mktemp)"
  local rc=0
  ctest "$@" 2>&1 | tee "$log" || rc=$?   # pipefail: ctest's status
  if grep -q "The following tests did not run" "$log"; then
    echo "setup: some tests were skipped (listed above); the test command installs what every test needs" >&2
    rc=1
  fi
  rm -f "$log"
  return "$rc"
}

# New build folders use Ninja: it starts a program's files while the libraries they link are still
# being built (Make waits for each library), and kept both cores busy through a clean build. ccache
# runs in depend mode: on a fresh machine every file misses the cache, and the default mode first
# runs the preprocessor over xtensor's headers to look it up (about 0.5 s a file); depend mode
# looks up the headers the compiler listed last time instead (docs/performance.md, "CI time").
# A folder configured before keeps its generator (CMake cannot change it).
export CCACHE_DEPEND=1
generator_for() {  # generator_for <build folder>: the -G option for cmake's first configure
  if [ ! -f "$1/CMakeCache.txt" ] && command -v ninja > /dev/null; then echo "-GNinja"; fi
}

# Every unit and gradcheck test under AddressSanitizer + UndefinedBehaviorSanitizer; any report
# fails the run (leaks included). The library at -Og -g1: line numbers kept, 20 % less compile
# time than -O1 (xgrad_core + xgrad_nn one file at a time: 146 s at -O1, 117 s at -Og), and the
# sanitized tests no slower (docs/performance.md, "CI time").
# The install.* tests (template_consumer, build_tree_consumer) are left out: they build an
# unsanitized program against the sanitized libraries, which cannot link; they run in the normal
# suite. The interop test's xgrad half runs sanitized (PyTorch runs in its own process).
# The tutorial programs and their tests (tests/tutorials/test_tutorials.cpp) are left out too: they run
# the library code the other tests cover, and building 16 programs sanitized cost about 3 minutes
# of a clean 2-core CI run (docs/performance.md, "CI time"); they run in both unsanitized passes.
# The check that the AVX2 clones round like SSE2 (ctest -L kernels) is left out: it compares the
# bytes two builds of the kernels write (rounding, not memory), and it compiled 15
# kernel files a second time (46 s of compiler time); the sanitized tests run the kernels themselves.
# The distributed tests (ctest -L distributed, Open MPI under mpirun) are left out as well: Open
# MPI's own start-up allocations (orte/pmix/hwloc) are reported as leaks by LSan, and its
# progress threads by ASan; they run in both unsanitized passes.
run_sanitized_suite() {
  local dir="${SANITIZE_DIR:-build-asan}"
  cmake $(generator_for "$dir") -S . -B "$dir" -DXGRAD_SANITIZE=ON -DXGRAD_BUILD_TUTORIALS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-Og -g1"
  cmake --build "$dir" -j "$jobs" --target xgrad_unit_tests xgrad_gradcheck_tests xgrad_gradgradcheck_tests xgrad_threads_tests xgrad_tier_tests xgrad_float32_tests xgrad_interop_torch
  ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    ctest_no_skips --test-dir "$dir" -j "$jobs" --output-on-failure --timeout 600 -LE 'install|distributed|kernels'
}
if [ "$mode" = sanitize ]; then
  run_sanitized_suite
  exit 0
fi

phase "configuring (CMake, $build_type)" cmake $(generator_for "$build_dir") -S . -B "$build_dir" -DCMAKE_BUILD_TYPE="$build_type"
if [ "$mode" = run ]; then  # only the tutorial programs and their runner, not the test suites
  phase "building the tutorials ($jobs jobs)" cmake --build "$build_dir" -j "$jobs" --target tutorial_programs
else
  cmake --build "$build_dir" -j "$jobs"
fi

# A second OpenBLAS kernel for the test suite's second pass. OpenBLAS picks its matrix-product
# kernels per CPU, and each adds in its own order, so results after a matrix product differ in
# their last bits from machine to machine; the suite must pass on every one. Sandybridge (AVX)
# differs from what any AVX2 CPU picks (Haswell, Zen, SkylakeX, Cooperlake); a CPU without AVX2
# may pick Sandybridge itself, so it gets Nehalem (SSE). XGRAD_SECOND_KERNEL overrides the choice;
# XGRAD_SECOND_KERNEL=none skips the second pass. The second pass leaves out the tests whose result
# no BLAS kernel or kernel tier can change: install.* (packaging: they build consumer projects
# again), browser (the report's pages and anchors), fixtures (PyTorch rewrites the fixtures),
# interop (PyTorch loads a saved model), layout (the source tree's include rules) and kernels (the
# AVX2 clones' bytes against SSE2's, both fast kernels); 16 s of the pass's 105.
# The second pass also runs the fused ops on their reference kernels (XGRAD_REFERENCE_KERNELS=1,
# nn/reference/), so that the whole suite passes on both tiers: the BLAS is shared by both tiers,
# so the fast tier under a second BLAS kernel would add little over the first pass, and a third
# pass would not fit CI's time budget. (The fast tier is tested against the reference in every
# pass: ctest -L tiers switches tiers itself.)
second_kernel() {
  local first="${OPENBLAS_CORETYPE:-}"
  if [ -n "${XGRAD_SECOND_KERNEL:-}" ]; then echo "$XGRAD_SECOND_KERNEL"
  elif ! grep -qw avx2 /proc/cpuinfo 2>/dev/null; then echo Nehalem
  elif [ "${first,,}" = sandybridge ]; then echo Haswell   # the first pass ran Sandybridge already
  else echo Sandybridge; fi
}

case "$mode" in
  run)   echo "setup: running every tutorial (quick settings); each one's whole output goes to $build_dir/tutorials/out"
         "$build_dir/tutorials/xgrad_run_tutorials" ;;
  test)  ctest_no_skips --test-dir "$build_dir" -j "$jobs" --output-on-failure --timeout 600
         kernel="$(second_kernel)"
         if [ "$kernel" != none ]; then
           echo "setup: the suite again with OPENBLAS_CORETYPE=$kernel (another summation order in matrix products)" \
                "and XGRAD_REFERENCE_KERNELS=1 (the reference kernels of the fused ops)"
           OPENBLAS_CORETYPE="$kernel" XGRAD_REFERENCE_KERNELS=1 ctest_no_skips --test-dir "$build_dir" -j "$jobs" --output-on-failure --timeout 600 \
             -LE 'install|browser|fixtures|interop|layout|kernels'
         fi
         if [ "${XGRAD_SANITIZE_TESTS:-1}" != 0 ]; then run_sanitized_suite; fi ;;
  build) ;;
  docs)  cmake --build "$build_dir" --target docs ;;
  debug) echo "Debug build ready: gdb --args $build_dir/tutorials/01_layernorm_by_hand --step" ;;
  *) echo "usage: scripts/setup.sh [run|test|sanitize|build|docs|debug]" >&2; exit 2 ;;
esac
