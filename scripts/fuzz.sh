#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang and runs each for a while.
#
#   scripts/fuzz.sh [seconds-per-target]      # default 60
#
# Build dir: $XGRAD_FUZZ_BUILD_DIR (default build-fuzz/); the corpora grow there across runs and
# crashing inputs land in build-fuzz/artifacts/. Needs clang-14 and libclang-rt-14-dev.
# Exits non-zero if any target found a crash.
set -euo pipefail

seconds=${1:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${XGRAD_FUZZ_BUILD_DIR:-$root/build-fuzz}
cxx=$(command -v clang++-14 || command -v clang++ || true)
if [[ -z $cxx ]]; then
  echo "fuzz.sh: clang++ not found (apt-get install clang-14 libclang-rt-14-dev)" >&2
  exit 2
fi

mkdir -p "$build"
cmake -S "$root" -B "$build" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DXGRAD_BUILD_FUZZERS=ON -DXGRAD_BUILD_TUTORIALS=OFF >"$build/configure.log" 2>&1 ||
  { cat "$build/configure.log" >&2; exit 1; }
cmake --build "$build" -j2 --target fuzz_npy fuzz_npz fuzz_idx

# Seed corpora from the committed fixtures (re-seeding is harmless: libFuzzer dedups by content).
corpus=$build/corpus
mkdir -p "$corpus/npy" "$corpus/npz" "$corpus/idx" "$build/artifacts"
for f in $(find "$root/tests/fixtures" -name '*.npy' -size -4k | sort | head -n 40); do
  cp "$f" "$corpus/npy/$(basename "$(dirname "$f")")_$(basename "$f")"
done
for case in op_gather linear; do
  (cd "$root/tests/fixtures/$case" && zip -q -X -0 "$corpus/npz/$case.npz" ./*.npy && zip -q -X -9 "$corpus/npz/$case-deflated.npz" ./*.npy)
done
for f in "$root"/tests/fixtures/idx/*.gz; do
  gzip -dc "$f" >"$corpus/idx/$(basename "$f" .gz)"
done

status=0
for target in npy npz idx; do
  dict=()
  [[ -f $root/tests/fuzz/$target.dict ]] && dict=(-dict="$root/tests/fuzz/$target.dict")
  log=$build/fuzz_$target.log
  echo "== fuzz_$target for ${seconds}s (log: $log)"
  if "$build/tests/fuzz/fuzz_$target" "${dict[@]}" -max_total_time="$seconds" -print_final_stats=1 \
      -rss_limit_mb=2048 -artifact_prefix="$build/artifacts/$target-" "$corpus/$target" >"$log" 2>&1; then
    echo "   no crash"
  else
    echo "   CRASH: see $log and $build/artifacts/" >&2
    status=1
  fi
  grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$log" | sed 's/^/   /'
  grep -E 'cov: ' "$log" | tail -n 1 | sed 's/^/   last: /'
done
exit $status
