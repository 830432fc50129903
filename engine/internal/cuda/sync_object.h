#pragma once

// SyncObject: a var's GPU dependencies, as CUDA events (the Async engines).
//
// State: at most one writer event (the newest write's) and at most one
// reader event per stream (the newest read on that stream since the last
// write), each tagged with its stream and sequence number.
//
// What may wait on what:
//  - a read waits for the writer;
//  - a write waits for the writer and for every reader;
//  - on the GPU, through SyncStream::WaitFor (skips its own stream and
//    waits it already has); on the CPU, through HostWaitFor.
// After launching, an op records one event on its stream and hands it to
// every var it touched: a read replaces its stream's reader event, a write
// clears the readers and becomes the writer. The engine's ordering already
// guarantees that no write overlaps another access of the var, but reads on
// different streams may complete concurrently, hence the lock.
//
// Thread safety: thread-safe.

#include <vector>

#include <absl/container/inlined_vector.h>

#include "engine/internal/access.h"
#include "engine/internal/cuda/sync_stream.h"
#include "engine/internal/spin_lock.h"

namespace ember::engine::internal {

class SyncObject {
 public:
  // Appends the events an access of `mode` must follow.
  void CollectWaits(Access mode, std::vector<EventRef>* waits) const;

  // Records that an access of `mode` was launched and will have finished
  // when `event` completes.
  void Completed(Access mode, EventRef event);

  // Drops every event (the var's GPU work is known to be done, or the var
  // is deleted).
  void Clear();

 private:
  mutable SpinLock mu_;
  EventRef writer_ ABSL_GUARDED_BY(mu_);
  absl::InlinedVector<EventRef, 2> readers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ember::engine::internal
