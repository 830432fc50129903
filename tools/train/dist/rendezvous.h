#pragma once

// Rendezvous: how the processes of one multi-host training run find each
// other, in torchrun's conventions. One process drives every GPU of its
// host (a rank per GPU: the per-device engine has a pool per GPU); the
// launch script (tools/train/launch.sh) starts one process per host and
// sets, for each:
//
//   EMBER_NODE_RANK    this host's index, 0 <= node rank < nodes
//   EMBER_NUM_NODES    how many hosts (processes) the run has
//   EMBER_RENDEZVOUS   the rendezvous file, on a path every host shares
//   EMBER_RUN_ID       names this run, so that a file left by an earlier
//                      run is never taken for this one's
//   EMBER_RENDEZVOUS_TIMEOUT_S   optional: how long to wait (default 300)
//
// Node 0 makes the NCCL unique id and publishes it with the run id and the
// world's shape, writing a temporary file and renaming it into place (a
// reader never sees half a file); the other nodes wait for a file of their
// run id and check that it describes the same world. Every node then knows
// the id, and its GPUs join NCCL as ranks node_rank * gpus_per_node + g.
//
// Errors: InvalidArgument naming the variable and its value (missing, not
// a number, a rank out of range), or naming the file and what differs
// (another world shape for the same run id); Unavailable when the file
// cannot be written or does not appear in time, naming the path and the run
// id.
//
// Thread safety: plain functions; Rendezvous blocks (polls the file).

#include <chrono>
#include <functional>
#include <string>

#include "tools/train/dist/nccl_communicator.h"

namespace ember::train {

struct ProcessGroupEnv {
  int node_rank = 0;
  int num_nodes = 1;
  std::string rendezvous_path;
  std::string run_id;
  std::chrono::milliseconds timeout{300'000};
};

// The variables above, checked.
ProcessGroupEnv ProcessGroupFromEnv();

// Node 0 publishes make_id() for the run of `env` (every node passes the
// same gpus_per_node); the others wait for it. Returns the run's id on
// every node.
NcclUniqueId Rendezvous(const ProcessGroupEnv& env, int gpus_per_node,
                        const std::function<NcclUniqueId()>& make_id);

}  // namespace ember::train
