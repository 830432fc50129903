#pragma once

// CoreRoundTripNs: how long one cache line takes to go from this thread to
// another and back, the price of every hand-off between a pushing thread
// and an engine worker.
//
// Why a bench measures it: on a VM the host moves the vCPUs between its
// cores, so the same two threads can share a core's caches one moment and
// sit on different sockets the next. On the 2-vCPU AMD EPYC VM of
// docs/benchmarks.md the round trip went from 62 to 1,159 ns between
// probes 100 ms apart. A figure taken in one such moment says as much
// about the host as about the code; the cold cases report the round trip
// beside every run so that a reader can tell the two apart.
//
// Thread safety: thread-safe; each call starts and joins its own thread.

namespace ember::bench {

// The mean of `trips` round trips of one cache line between the calling
// thread and a thread started for the purpose (both spin; a few ms).
[[nodiscard]] double CoreRoundTripNs(int trips = 20000);

}  // namespace ember::bench
