#!/usr/bin/env bash
# Runs Ember's test suite (README command 2; CI runs it through .ci/run).
#
# Stages, each announced by a banner:
#   deps     tools/install_deps.sh
#   default  build/ (RelWithDebInfo, gcc, CUDA code too when nvcc is found):
#            the whole ctest suite, labels stress and install included
#   tsan     build-tsan/ (clang, Debug -O1, ThreadSanitizer,
#            -Werror=thread-safety, tools but no benches, no CUDA):
#            ctest -L 'engine|storage|ops|cache|train' -LE 'stress|example'
#   asan     build-asan/ (gcc, Debug -O1, AddressSanitizer + UBSan +
#            LeakSanitizer, tools but no benches, no CUDA):
#            ctest -L 'engine|storage|ops|cache|train' -LE 'stress|example'
# A failed stage does not stop the later ones (a failed deps stage does);
# the run ends with one summary line per stage and exits non-zero if any
# stage failed.
#
# Usage: tools/run_tests.sh [--quick] [--no-deps]
#   --quick    skip the sanitizer stages (tsan, asan)
#   --no-deps  skip tools/install_deps.sh
# Environment:
#   EMBER_JOBS             build and ctest parallelism (default 2)
#   EMBER_BUILD_DIR        default build dir (build)
#   EMBER_TSAN_BUILD_DIR   ThreadSanitizer build dir (build-tsan)
#   EMBER_ASAN_BUILD_DIR   AddressSanitizer build dir (build-asan)

# The stage_* functions are called indirectly, through run_stage.
# shellcheck disable=SC2317
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

quick=0
deps=1
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    --no-deps) deps=0 ;;
    -h | --help)
      awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
      exit 0
      ;;
    *)
      echo "run_tests: unknown argument '$arg' (try --help)" >&2
      exit 2
      ;;
  esac
done

jobs=${EMBER_JOBS:-2}
build_dir=${EMBER_BUILD_DIR:-build}
tsan_dir=${EMBER_TSAN_BUILD_DIR:-build-tsan}
asan_dir=${EMBER_ASAN_BUILD_DIR:-build-asan}
# What the sanitizer builds run: the library's tests, not the long stress
# runs, nor the examples (the default stage runs those under every engine).
sanitized_labels='engine|storage|ops|cache|train'
sanitized_skip='stress|example'


# CMake looks for nvcc on PATH only; the CUDA toolkit's usual home is added so
# that CUDA code compiles wherever the toolkit is installed, CPU-only
# machines included (CUDA tests skip without a GPU).
if ! command -v nvcc >/dev/null 2>&1 && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH="$PATH:/usr/local/cuda/bin"
fi

banner() {
  printf '\n'
  printf '=%.0s' {1..78}
  printf '\n==== %s\n' "$*"
  printf '=%.0s' {1..78}
  printf '\n'
}

# ctest flags shared by every stage: fail on an empty selection, so that a
# wrong label never passes as "nothing to run".
ctest_args=(--output-on-failure --no-tests=error -j "$jobs")

stage_deps() {
  tools/install_deps.sh
}

stage_default() {
  cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo
  cmake --build "$build_dir" -j "$jobs"
  ctest --test-dir "$build_dir" "${ctest_args[@]}"
}

# ":suppressions=<abs path>" when tests/<name>.supp exists, else nothing. Each
# entry in those files says which uninstrumented library makes the sanitizer
# wrong there; the path is absolute because ctest runs in the build dir.
suppressions() {
  if [[ -f "tests/$1.supp" ]]; then
    printf ':suppressions=%s' "$PWD/tests/$1.supp"
  fi
}

# The sanitizer builds are Debug (asserts on, and -O1 from CMAKE_CXX_FLAGS is
# not overridden by a build-type -O2), without the tools and the CUDA code.
stage_tsan() {
  # atexit_sleep_ms: TSan sleeps 1 s at exit (its default) so that threads
  # still running can report races; every ctest case is its own process, so
  # that second would add minutes. The engine joins its workers before exit,
  # and 200 ms still leaves stragglers time to report.
  # die_after_fork=0: the fork test's child starts a fresh engine's threads,
  # which TSan refuses by default after a multithreaded fork; the child
  # touches nothing the parent's threads held.
  # allocator_may_return_null=1: the storage tests ask for impossible sizes
  # and expect OutOfMemory, as the plain allocator reports it (the
  # sanitizers abort by default). The same for ASan below.
  TSAN_OPTIONS="allocator_may_return_null=1:halt_on_error=1:second_deadlock_stack=1:atexit_sleep_ms=200:die_after_fork=0$(suppressions tsan)${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
  # Sanitized tests run several times slower than the per-test deadline's
  # default assumes.
  export EMBER_TEST_DEADLINE_S=${EMBER_TEST_DEADLINE_S:-600}
  export TSAN_OPTIONS
  # Clang is also the compiler with -Wthread-safety (see the top-level
  # CMakeLists.txt); here its findings are errors.
  CC=clang CXX=clang++ cmake -S . -B "$tsan_dir" \
    -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_CXX_FLAGS="-fsanitize=thread -g -O1 -Werror=thread-safety" \
    -DEMBER_BUILD_BENCHES=OFF -DEMBER_CUDA=OFF
  cmake --build "$tsan_dir" -j "$jobs"
  ctest --test-dir "$tsan_dir" -L "$sanitized_labels" -LE "$sanitized_skip" "${ctest_args[@]}"
}

stage_asan() {
  # LeakSanitizer stops the process's threads with ptrace-like means that
  # some containers forbid; it works on this project's build machine, which
  # CI matches (checked with a deliberate leak), so leak checking stays on.
  # Where it does not, LSan aborts with "LeakSanitizer has encountered a
  # fatal error": run with ASAN_OPTIONS=detect_leaks=0 there.
  export ASAN_OPTIONS="allocator_may_return_null=1:detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
  LSAN_OPTIONS="${LSAN_OPTIONS:-}$(suppressions lsan)"
  LSAN_OPTIONS=${LSAN_OPTIONS#:}
  UBSAN_OPTIONS="print_stacktrace=1$(suppressions ubsan)${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
  export LSAN_OPTIONS UBSAN_OPTIONS
  export EMBER_TEST_DEADLINE_S=${EMBER_TEST_DEADLINE_S:-600}
  CC=gcc CXX=g++ cmake -S . -B "$asan_dir" \
    -DCMAKE_CXX_COMPILER=g++ \
    -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1" \
    -DEMBER_BUILD_BENCHES=OFF -DEMBER_CUDA=OFF
  cmake --build "$asan_dir" -j "$jobs"
  ctest --test-dir "$asan_dir" -L "$sanitized_labels" -LE "$sanitized_skip" "${ctest_args[@]}"
}

summary=()
failed=0

# run_stage NAME TITLE FUNCTION: runs FUNCTION in a subshell with errexit in
# force and records the result; the exit status is left in stage_rc. Call it
# as a plain command, never under `if`, `||` or `&&`: there bash ignores
# errexit in everything the call runs, and a failing step would not stop the
# stage.
stage_rc=0
run_stage() {
  local name=$1 title=$2 fn=$3 start rc
  banner "stage $name: $title"
  start=$SECONDS
  set +e
  (
    set -e
    "$fn"
  )
  rc=$?
  set -e
  local secs=$((SECONDS - start))
  if ((rc == 0)); then
    summary+=("$(printf '%-8s PASS  %5ds  %s' "$name" "$secs" "$title")")
  else
    summary+=("$(printf '%-8s FAIL  %5ds  %s (exit %d)' "$name" "$secs" "$title" "$rc")")
    failed=1
  fi
  banner "stage $name: $( ((rc == 0)) && echo PASS || echo "FAIL (exit $rc)") in ${secs}s"
  stage_rc=$rc
}

skip_stage() {
  summary+=("$(printf '%-8s SKIP         %s' "$1" "$2")")
}

print_summary() {
  banner "summary"
  printf '%s\n' "${summary[@]}"
  if ((failed)); then
    echo "run_tests: FAILED"
  else
    echo "run_tests: OK"
  fi
}

if ((deps)); then
  run_stage deps "install dependencies" stage_deps
  if ((stage_rc != 0)); then
    print_summary
    exit 1
  fi
else
  skip_stage deps "(--no-deps)"
fi

run_stage default "$build_dir/: build, ctest (all labels)" stage_default
if ((quick)); then
  skip_stage tsan "(--quick)"
  skip_stage asan "(--quick)"
else
  run_stage tsan "$tsan_dir/: clang ThreadSanitizer, ctest -L '$sanitized_labels' -LE '$sanitized_skip'" stage_tsan
  run_stage asan "$asan_dir/: gcc ASan+UBSan, ctest -L '$sanitized_labels' -LE '$sanitized_skip'" stage_asan
fi

print_summary
exit "$failed"
