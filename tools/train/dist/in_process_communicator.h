#pragma once

// InProcessCommunicatorGroup: G ranks in one process, each a Communicator
// used by its own thread; the collectives meet in shared memory. It stands
// in for NCCL in tests and CI (no GPU), and checks more than NCCL can:
//
// - Matching. Collective n must be the same on every rank (kind and
//   `what`), and an AllToAllV's counts must agree (what rank s sends to d
//   is what d expects from s), AllReduceSum's sizes too. A mismatch is an
//   InvalidArgument on every rank of that collective, naming the two ranks,
//   their collectives and, for counts, the two counts.
// - Timeouts. A rank that waits longer than the timeout for its peers
//   throws Unavailable naming the rank, the collective and the ranks that
//   never arrived; the peers that did arrive throw it too. Unavailable, of
//   Ember's errors, because a peer that never comes is a resource this
//   rank does not have (the NCCL implementation will throw it for a lost
//   peer); the call itself was valid (not InvalidArgument or UsageError).
// - Broken group. After the first failure (a mismatch, a timeout, a rank's
//   own bad arguments), every later call on any rank throws at once the
//   first failure's type, naming it. No call ever hangs.
//
// The data moves by copies between the ranks' buffers: AllToAllV copies
// each piece once; AllReduceSum copies each rank's input once, then every
// rank adds all inputs in rank order, so the ranks' results are the same
// bits.
//
// Thread safety: thread-safe as the Communicator contract says: one thread
// per rank's communicator, the ranks concurrently.

#include <chrono>
#include <memory>
#include <vector>

#include "tools/train/dist/communicator.h"

namespace ember::train {

struct InProcessCommunicatorOptions {
  // How long a rank waits in one collective for all ranks to arrive, > 0.
  std::chrono::milliseconds timeout{60'000};
};

class InProcessCommunicatorGroup {
 public:
  // Makes the group's `world_size` ranks. Throws InvalidArgument for
  // world_size < 1 or a timeout <= 0.
  explicit InProcessCommunicatorGroup(int world_size,
                                      const InProcessCommunicatorOptions& options = {});
  // REQUIRES: no call in flight on any rank.
  ~InProcessCommunicatorGroup();
  InProcessCommunicatorGroup(const InProcessCommunicatorGroup&) = delete;
  InProcessCommunicatorGroup& operator=(const InProcessCommunicatorGroup&) = delete;

  [[nodiscard]] int world_size() const { return static_cast<int>(ranks_.size()); }

  // Rank `rank`'s communicator, owned by the group (which must outlive its
  // use). Throws InvalidArgument unless 0 <= rank < world_size().
  [[nodiscard]] Communicator& communicator(int rank);

 private:
  class Rendezvous;  // the state the ranks share
  class Rank;        // one rank's Communicator

  std::unique_ptr<Rendezvous> rendezvous_;
  std::vector<std::unique_ptr<Rank>> ranks_;
};

}  // namespace ember::train
