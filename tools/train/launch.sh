#!/usr/bin/env bash
# Starts this host's process of a multi-host run (docs/train.md, "Several
# GPUs"), in torchrun's conventions: run it on every host with the same
# --nodes, --rendezvous and --run_id, and each host's own --node_rank. One
# process drives every GPU of its host. It sets the variables that
# tools/train/dist/rendezvous.h reads and runs the command after `--`:
#   EMBER_NUM_NODES, EMBER_NODE_RANK, EMBER_RENDEZVOUS, EMBER_RUN_ID,
#   EMBER_RENDEZVOUS_TIMEOUT_S
# Node 0 publishes the NCCL unique id in the rendezvous file; the others
# wait for it, so the file must be on a path every host shares (NFS, a
# parallel filesystem), and the run id must be new for each run (a file
# left by an earlier run is then ignored).
#
# Usage: tools/train/launch.sh --nodes=N --node_rank=R --rendezvous=PATH
#            [--run_id=ID] [--timeout_s=S] -- COMMAND [ARGS...]
#   --run_id     default: $SLURM_JOB_ID when set (the same on every host of
#                a Slurm job); otherwise required
#   --timeout_s  how long a node waits for node 0's file (default 300)
# Exits 2 on a bad argument, naming it; otherwise with the command's status.
set -euo pipefail

nodes="" node_rank="" rendezvous="" run_id="${SLURM_JOB_ID:-}" timeout_s=300
usage_error() {
  echo "launch.sh: $1 (try --help)" >&2
  exit 2
}
while (($#)); do
  case "$1" in
    --nodes=*) nodes="${1#*=}" ;;
    --node_rank=*) node_rank="${1#*=}" ;;
    --rendezvous=*) rendezvous="${1#*=}" ;;
    --run_id=*) run_id="${1#*=}" ;;
    --timeout_s=*) timeout_s="${1#*=}" ;;
    -h | --help)
      awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
      exit 0
      ;;
    --)
      shift
      break
      ;;
    *) usage_error "unknown argument '$1'" ;;
  esac
  shift
done

[[ "$nodes" =~ ^[1-9][0-9]*$ ]] || usage_error "--nodes='$nodes' is not a positive number"
[[ "$node_rank" =~ ^[0-9]+$ ]] || usage_error "--node_rank='$node_rank' is not a number"
((node_rank < nodes)) || usage_error "--node_rank=$node_rank is not below --nodes=$nodes"
[[ -n "$rendezvous" ]] || usage_error "--rendezvous is required (a file on a path every host shares)"
[[ -n "$run_id" && ! "$run_id" =~ [[:space:]/] ]] ||
  usage_error "--run_id='$run_id' must be set (the same on every host), without spaces or slashes"
[[ "$timeout_s" =~ ^[1-9][0-9]*$ ]] || usage_error "--timeout_s='$timeout_s' is not a positive number"
(($#)) || usage_error "no command after --"

export EMBER_NUM_NODES="$nodes" EMBER_NODE_RANK="$node_rank" EMBER_RENDEZVOUS="$rendezvous" \
  EMBER_RUN_ID="$run_id" EMBER_RENDEZVOUS_TIMEOUT_S="$timeout_s"
exec "$@"
