#!/usr/bin/env bash
# Checks the layering of the tree (../shared/design/ARCHITECTURE.md):
#   1. a layer's internals are its own: only files under X/ include
#      "X/internal/..." (X: engine, storage, ops, cache; white-box tests of
#      internals sit beside them, in X/internal/);
#   2. arrows only point down, in the order engine < storage < ops < cache:
#      no file of a layer includes a header of a layer above it.
# Prints every offending include as FILE:LINE: text, and exits 1 if any.
#
# Usage: tools/check_layers.sh [ROOT]   (ROOT: the repository, by default
#        this script's), or tools/check_layers.sh --self-test (plants one
#        violation of each rule in a scratch tree and expects both caught).
# Run by the test suite (ctest test layers.includes).
set -euo pipefail

layers=(engine storage ops cache)

check() {
  local root=$1 status=0
  local sources
  sources=$(cd "$root" && find . -path ./build\* -prune -o -path ./.git -prune -o \
    \( -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \) -print | sed 's|^\./||' | sort)
  local file
  for file in $sources; do
    local own=${file%%/*}
    local rank_own=-1 i
    for i in "${!layers[@]}"; do [[ ${layers[$i]} == "$own" ]] && rank_own=$i; done
    while IFS= read -r hit; do
      [[ -z $hit ]] && continue
      local line=${hit%%:*} text=${hit#*:}
      local target
      target=$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1/' <<<"$text")
      local top=${target%%/*}
      if [[ $target == */internal/* && $top != "$own" ]]; then
        echo "$file:$line: includes $top's internals: $text"
        status=1
      fi
      if ((rank_own >= 0)); then
        for i in "${!layers[@]}"; do
          if [[ ${layers[$i]} == "$top" ]] && ((i > rank_own)); then
            echo "$file:$line: $own includes $top, a layer above it: $text"
            status=1
          fi
        done
      fi
    done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$root/$file" || true)
  done
  return $status
}

self_test() {
  local scratch
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' RETURN
  mkdir -p "$scratch/engine/internal" "$scratch/ops" "$scratch/tests/engine"
  echo '#include "engine/internal/var.h"' >"$scratch/tests/engine/peek_test.cc"
  echo '#include "ops/matmul.h"' >"$scratch/engine/uses_ops.cc"
  echo '#include "engine/internal/var.h"' >"$scratch/engine/internal/fine.cc"
  local out
  if out=$(check "$scratch"); then
    echo "self-test FAILED: violations were not caught"
    return 1
  fi
  if [[ $out != *"peek_test.cc:1: includes engine's internals"* ||
        $out != *"uses_ops.cc:1: engine includes ops, a layer above it"* ||
        $out == *fine.cc* ]]; then
    echo "self-test FAILED: unexpected report:"
    echo "$out"
    return 1
  fi
  echo "self-test passed"
}

if [[ ${1:-} == --self-test ]]; then
  self_test
  exit
fi
root=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
if check "$root"; then
  echo "layers: every include respects the layering"
else
  exit 1
fi
