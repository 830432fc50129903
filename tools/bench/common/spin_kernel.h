#pragma once

// The kernel of ember-bench-engine's GPU cases and ember-bench-storage's
// busy case: a single thread that spins on the GPU's own clock
// (%globaltimer) for a set time, then increments an int. Spinning on the clock, not a loop count,
// makes a kernel last as long as the case says on any GPU; the increment, read back at the end,
// shows a dependency the engine failed to keep (two kernels on one counter that overlap can lose an
// increment).
//
// Thread safety: launches may come from any thread, on any stream.

#include <cuda_runtime_api.h>

namespace ember::bench {

// Enqueues on `stream`: spin `spin_us` microseconds (0: no spin), then
// ++*counter. REQUIRES: `counter` is device memory of the stream's device.
// A launch error is left for cudaGetLastError, as with <<<>>>.
void LaunchSpinIncrement(cudaStream_t stream, int* counter, int spin_us);

}  // namespace ember::bench
