#!/usr/bin/env bash
# Quick start (README command 1): installs the dependencies, builds Ember in
# build/ (RelWithDebInfo: -O2 -g, the build tools/run_tests.sh uses too) with
# every core, and runs the main job, the engine stress tool: a million ops of
# a random workload, each result checked. Exits non-zero if any step fails or
# the stress tool finds a wrong result.
#
# Usage: tools/quickstart.sh [--no-deps]
#   --no-deps   skip tools/install_deps.sh
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

deps=1
for arg in "$@"; do
  case "$arg" in
    --no-deps) deps=0 ;;
    -h | --help)
      awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
      exit 0
      ;;
    *)
      echo "quickstart: unknown argument '$arg' (try --help)" >&2
      exit 2
      ;;
  esac
done

# CMake looks for nvcc on PATH only; add the CUDA toolkit's usual home so that
# the CUDA code builds wherever the toolkit is installed.
if ! command -v nvcc >/dev/null 2>&1 && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH="$PATH:/usr/local/cuda/bin"
fi

banner() { printf '\n==== %s ====\n' "$*"; }

if ((deps)); then
  banner "dependencies"
  tools/install_deps.sh
fi

banner "configure (RelWithDebInfo, build/)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo

banner "build (-j$(nproc))"
cmake --build build -j "$(nproc)"

banner "run: build/bin/ember-stress --ops 1000000"
build/bin/ember-stress --ops 1000000

banner "quickstart: OK"
