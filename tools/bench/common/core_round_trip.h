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

// Round trips a probe makes by default: a few ms, long enough to average
// over the host's jitter, short enough to sit between two runs.
inline constexpr int kRoundTrips = 20000;

// The mean of `trips` round trips of one cache line between the calling
// thread and a thread started for the purpose (both spin).
[[nodiscard]] double CoreRoundTripNs(int trips = kRoundTrips);

}  // namespace ember::bench
