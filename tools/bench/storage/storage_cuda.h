#pragma once

// What the CUDA files of ember-bench-storage share (storage_cases.cc,
// storage_allocators.cc and storage_profile.cc): the busy kernel, the
// allocators of the columns, and the profile case.
//
// Thread safety: LaunchBusyKernel and StreamBusy from any thread; an
// Allocator from several threads at once on disjoint slots (for the
// columns whose allocator is thread-safe: all of them); the rest from the
// bench's main thread.

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "storage/storage.h"
#include "tools/bench/common/cuda_device.h"
#include "tools/bench/storage/storage_cases.h"

namespace ember::bench::storage_bench {

// Enqueues on `stream` a one-thread kernel that spins `us` microseconds and
// then writes the int at `data` (common/spin_kernel.h); checks the launch.
void LaunchBusyKernel(cudaStream_t stream, void* data, int us);

// True while `stream` has work that has not finished (cudaStreamQuery).
bool StreamBusy(cudaStream_t stream);

// The columns (storage_cases.h).
inline constexpr char kRound[] = "Ember round";
inline constexpr char kAsync[] = "Ember async";
inline constexpr char kMallocAsync[] = "MallocAsync";
inline constexpr char kMalloc[] = "cudaMalloc";

// The allocator of a column. Numbered slots hold the buffers alive at once;
// threads use disjoint slots. CUDA calls throw CudaError naming the call.
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void Alloc(int slot, std::size_t bytes, cudaStream_t stream) = 0;
  // Frees the slot's buffer after the work on `stream` that used it.
  virtual void Free(int slot, cudaStream_t stream) = 0;
  [[nodiscard]] virtual void* data(int slot) const = 0;
  // What the allocator says about itself after a run, for the notes; may be
  // empty.
  [[nodiscard]] virtual std::string Describe() const = 0;
};

// A fresh allocator for `column` (one of the names above) with `slots`
// slots: a new manager or pool, on device 0.
std::unique_ptr<Allocator> MakeAllocator(const std::string& column, int slots);

// Non-blocking streams on the current device, destroyed with this.
class Streams {
 public:
  explicit Streams(int count);
  ~Streams();
  Streams(const Streams&) = delete;
  Streams& operator=(const Streams&) = delete;
  [[nodiscard]] const std::vector<cudaStream_t>& all() const { return streams_; }

 private:
  std::vector<cudaStream_t> streams_;
};

// An Ember column: its name and the device pool behind it.
struct EmberColumn {
  std::string name;
  storage::DevicePoolType pool;
};

// The profile case (storage_cases.h) for `columns`, once: adds its figures
// to `samples` (run 1) and what it found to `notes`. Throws like
// RunStorageCases.
void RunProfileCase(const StorageBenchOptions& options, const std::vector<EmberColumn>& columns,
                    Results* samples, std::vector<std::string>* notes);

}  // namespace ember::bench::storage_bench
