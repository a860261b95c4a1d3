#!/usr/bin/env bash
# One entry point for a fresh Debian machine (run as root, or with sudo available):
#   scripts/setup.sh run    install what is missing, build, run the tutorials (the main job)
#   scripts/setup.sh test   install what is missing, build, run the whole test suite
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

packages=(cmake make g++ ccache
          xtensor-dev xtl-dev libxtensor-blas-dev libxsimd-dev libopenblas-dev
          catch2 libfmt-dev libzip-dev zipcmp zipmerge ziptool zlib1g-dev pkg-config
          gnuplot-nox dataset-fashion-mnist)
# Only the API reference needs these; run and test do not.
if [ "$mode" = docs ]; then packages+=(doxygen graphviz); fi
if [ "$mode" = debug ]; then packages+=(gdb); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing missing Debian packages: ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE="$build_type"
cmake --build "$build_dir" -j "$jobs"

export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"
case "$mode" in
  run)   cmake --build "$build_dir" --target tutorials ;;
  test)  ctest --test-dir "$build_dir" -j "$jobs" --output-on-failure --timeout 600 ;;
  build) ;;
  docs)  cmake --build "$build_dir" --target docs ;;
  debug) echo "Debug build ready: gdb --args $build_dir/tutorials/01_layernorm_by_hand --step" ;;
  *) echo "usage: scripts/setup.sh [run|test|build|docs|debug]" >&2; exit 2 ;;
esac
