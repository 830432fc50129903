#pragma once

// RunOnRankThreads: the ranks of one process as threads, the way the
// in-process communicator's ranks run (tests, and ember-train --ranks).
//
// Thread safety: body and on_failure run on the ranks' threads, each
// rank's on its own.

#include <functional>

namespace ember::train {

// Runs body(rank) on a thread per rank and joins them all. When a rank
// throws, on_failure(rank) (if given) runs on that rank's thread at once,
// e.g. to break the communicator's group so that its peers stop instead of
// waiting for it; after the join the exception of the lowest failing rank
// is rethrown.
void RunOnRankThreads(int ranks, const std::function<void(int)>& body,
                      const std::function<void(int)>& on_failure = {});

}  // namespace ember::train
