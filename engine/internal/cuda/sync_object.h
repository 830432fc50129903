#pragma once

// SyncObject: a var's GPU dependencies, as CUDA events (the Async engines).
//
// State: at most one writer event (the newest write's) and at most one
// reader event per stream (the newest read on that stream since the last
// write), each a StreamEvent (stream, sequence number, event).
//
// What may wait on what:
//  - a read waits for the writer;
//  - a write waits for the writer and for every reader;
//  - on the GPU, through SyncStream::WaitFor (skips its own stream and
//    waits it already has); on the CPU, through HostWaitFor.
// After launching, an op records one event on its stream and hands it to
// every var it touched: a read replaces its stream's reader event, a write
// clears the readers and becomes the writer. Events the GPU has passed are
// neither collected nor kept, so an idle var waits on nothing. The engine's
// ordering already guarantees that no write overlaps another access of the
// var, but reads on different streams may complete concurrently, hence the
// lock.
//
// Thread safety: thread-safe.

#include <absl/container/inlined_vector.h>

#include "engine/base/spin_lock.h"
#include "engine/internal/access.h"
#include "engine/internal/cuda/sync_stream.h"

namespace ember::engine::internal {

// The events one op must follow: few, so kept on the stack.
using EventWaits = absl::InlinedVector<StreamEvent, 8>;

class SyncObject {
 public:
  // Appends the events an access of `mode` must follow.
  void CollectWaits(Access mode, EventWaits* waits) const;

  // Records that an access of `mode` was launched and will have finished
  // when `event` completes.
  void Completed(Access mode, const StreamEvent& event);

  // Drops every event (the var is deleted).
  void Clear();

 private:
  mutable SpinLock mu_;
  StreamEvent writer_ ABSL_GUARDED_BY(mu_);  // stream null: none
  absl::InlinedVector<StreamEvent, 2> readers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ember::engine::internal
