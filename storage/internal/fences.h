#pragma once

// Fences: the CUDA events behind event-ordered reuse (see buffer.h). Events
// come from a pool per device; a fence's event is owned by the one block
// that carries it until it is consumed (ordered on, or found passed), then
// goes back to the pool. cudaStreamWaitEvent captures the event when called,
// so returning it right after the wait is safe.
//
// A build without CUDA links no_cuda.cc: there are no streams there, so
// every fence list is empty.
//
// Thread safety: thread-safe.

#include <string_view>
#include <vector>

#include "storage/buffer.h"

namespace ember::storage::internal {

// Records one event on each of `streams` (null entries skipped). Never
// blocks the host.
std::vector<Fence> RecordFences(const std::vector<void*>& streams);

// Orders work on `stream` after `fences` and consumes them: a stream wait
// per fence of another stream, nothing for fences of `stream` itself, a host
// wait for each fence when `stream` is null.
void OrderAfter(std::vector<Fence>& fences, void* stream);

// Consumes the fences the GPU has passed (cudaEventQuery); true when none
// remain.
bool DropPassed(std::vector<Fence>& fences);

// Waits on the host for every fence and consumes them.
void HostWait(std::vector<Fence>& fences);

}  // namespace ember::storage::internal
