#!/usr/bin/env bash
# Runs a command up to --tries times and, when one run outlives --after_s
# seconds, writes every thread's stack of it (and, under cuda-gdb, the
# kernels each GPU is running) to DIR/stacks.txt, then kills it. For the
# hangs of several GPU ranks in one process (docs/train.md, "Several
# GPUs"): a collective's timeout names the ranks that waited, the stacks
# show what held the one that never came.
#
# Usage: tools/train/stall_stacks.sh --dir=DIR [--tries=N] [--after_s=S]
#            [--debugger=PATH] -- COMMAND [ARGS...]
#   --tries     runs before giving up on a stall (default 10)
#   --after_s   a run older than this has stalled (default 60; set it
#               below the collectives' timeout, and above a normal run)
#   --debugger  cuda-gdb (default, from PATH or /usr/local/cuda/bin) or gdb
# Each run's output goes to DIR/run<i>.log. A stalled run's last lines
# and a digest of its stacks (stack_digest.py: alike threads once) are
# printed too, for where DIR does not come back. Exits 0 after a stall
# was caught, 1 if every run finished, 2 on a bad argument.
set -euo pipefail

dir="" tries=10 after_s=60 debugger=""
usage_error() {
  echo "stall_stacks.sh: $1 (try --help)" >&2
  exit 2
}
while (($#)); do
  case "$1" in
    --dir=*) dir="${1#*=}" ;;
    --tries=*) tries="${1#*=}" ;;
    --after_s=*) after_s="${1#*=}" ;;
    --debugger=*) debugger="${1#*=}" ;;
    --help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//' && exit 0 ;;
    --) shift && break ;;
    *) usage_error "unknown argument '$1'" ;;
  esac
  shift
done
(($#)) || usage_error "no command after --"
[[ -n "$dir" ]] || usage_error "--dir is required"
[[ "$tries" =~ ^[1-9][0-9]*$ ]] || usage_error "--tries='$tries' is not a positive integer"
[[ "$after_s" =~ ^[1-9][0-9]*$ ]] || usage_error "--after_s='$after_s' is not a positive integer"
if [[ -z "$debugger" ]]; then
  debugger=$(command -v cuda-gdb || echo /usr/local/cuda/bin/cuda-gdb)
fi
[[ -x "$debugger" ]] || command -v "$debugger" >/dev/null ||
  usage_error "--debugger '$debugger' is not an executable"
mkdir -p "$dir"

# Whether `pid` runs: a child that exited stays a zombie until waited for.
alive() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [[ "${stat:0:1}" != Z ]]
}

for ((i = 1; i <= tries; ++i)); do
  start=$SECONDS
  "$@" >"$dir/run$i.log" 2>&1 &
  pid=$!
  while alive "$pid" && ((SECONDS - start < after_s)); do sleep 1; done
  if ! alive "$pid"; then
    wait "$pid" && status=0 || status=$?
    echo "run $i: finished in $((SECONDS - start)) s (status $status)"
    continue
  fi
  echo "run $i: still running after ${after_s} s; taking its stacks"
  kernels=()
  [[ "$(basename "$debugger")" == cuda-gdb* ]] && kernels=(-ex "info cuda kernels")
  "$debugger" -batch -p "$pid" -ex "set pagination off" -ex "info threads" \
    -ex "thread apply all bt" "${kernels[@]}" >"$dir/stacks.txt" 2>&1 || true
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  echo "stacks of run $i in $dir/stacks.txt; the run's last lines, then a digest:"
  tail -n 20 "$dir/run$i.log"
  python3 "$(dirname "$0")/stack_digest.py" "$dir/stacks.txt" ||
    head -n 200 "$dir/stacks.txt"
  exit 0
done
echo "no run stalled in $tries tries"
exit 1
