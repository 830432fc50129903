#pragma once

// GpuCount: how many CUDA devices this process can use, for every layer: 0
// on a machine without a GPU or driver, and in a build without CUDA (whose
// GPU paths then report Unavailable instead of failing later).
//
// Thread safety: thread-safe.

namespace ember {

// The number of CUDA devices; 0 without CUDA, a driver or a device. Never
// throws.
int GpuCount();

}  // namespace ember
