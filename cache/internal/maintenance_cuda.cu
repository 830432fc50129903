// The cache's upkeep on the GPU (cache_kernels.h): InitializeCuda,
// ReadDeviceCuda, FlushCuda, ResetCuda (which zeroes LFU's counts too) and
// WarmCuda, with the semantics of their CPU twins (cache_cpu.cc,
// cache_arrays.cc).
//
// Flush moves every cached row (or every dirty one) home with a warp per
// slot (rows in 16-byte words where aligned). Warm is the one sequential
// step: rows of one set fill its free ways in the given order, so the host
// groups the rows by set (stably) and a warp takes each set's rows in
// turn; sets go in parallel.
// Warm is rare (a checkpoint's hot rows), so its rows are staged through a
// pinned and a device buffer of the process-wide managers, both released
// behind the stream's work.

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "cache/internal/cache_cuda.cuh"
#include "cache/internal/cache_kernels.h"
#include "engine/cuda/check.h"
#include "engine/cuda/scoped_device.h"
#include "storage/storage.h"

namespace ember::cache::internal {

using namespace cuda;  // NOLINT(build/namespaces): the helpers of cache_cuda.cuh

namespace {

__global__ void __launch_bounds__(kBlockThreads) EmptySlotsKernel(const CacheArgs cache) {
  const int64_t slots = cache.num_sets * kWays;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t slot = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; slot < slots;
       slot += stride) {
    cache.tags[slot] = kEmpty;
    cache.timestamps[slot] = -1;
    cache.locks[slot] = 0;
    cache.dirty[slot] = 0;
  }
}

// Zeroes n values anywhere the GPU reaches (device, managed or host-mapped
// memory, which cudaMemsetAsync does not take everywhere).
__global__ void __launch_bounds__(kBlockThreads) ZeroKernel(int64_t* values, int64_t n) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    values[i] = 0;
  }
}

// A warp per slot: a cached row (or, under WriteBack::kDirtyRows, a dirty
// one) goes back to its home row, and is clean.
__global__ void __launch_bounds__(kBlockThreads) FlushKernel(const CacheArgs cache) {
  const int64_t slots = cache.num_sets * kWays;
  const int64_t warps = int64_t{gridDim.x} * kBlockWarps;
  for (int64_t slot = int64_t{blockIdx.x} * kBlockWarps + threadIdx.x / kWarp; slot < slots;
       slot += warps) {
    const int64_t row = cache.tags[slot];
    if (row == kEmpty || (!cache.write_back_every_row && cache.dirty[slot] == 0)) continue;
    const int table = TableOf(cache, row);
    WarpCopy(SlotRowAt(cache, slot), HomeRowAt(cache, table, row), RowBytes(cache, table));
    if (Lane() == 0) cache.dirty[slot] = 0;
  }
}

// A warp per run of rows of one set (rows[run_starts[r] .. run_starts[r+1])
// in the given order): each row not cached yet takes the first empty way in
// victim order among those a prefetch could take (WarmCpu), if any.
__global__ void __launch_bounds__(kBlockThreads)
    WarmKernel(const CacheArgs cache, const int64_t* rows, const int64_t* run_starts, int64_t runs,
               int64_t timestep) {
  const int lane = Lane();
  const int64_t warps = int64_t{gridDim.x} * kBlockWarps;
  for (int64_t r = int64_t{blockIdx.x} * kBlockWarps + threadIdx.x / kWarp; r < runs; r += warps) {
    for (int64_t i = run_starts[r]; i < run_starts[r + 1]; ++i) {
      const int64_t row = rows[i];
      const int64_t slot = SetOf(row, cache.num_sets) * kWays + lane;
      const int64_t tag = cache.tags[slot];
      if (__ballot_sync(kFullMask, tag == row) != 0) continue;  // cached already
      const bool free_way =
          tag == kEmpty && cache.locks[slot] == 0 && cache.timestamps[slot] < timestep;
      const unsigned free_ways = __ballot_sync(kFullMask, free_way);
      if (free_ways == 0) continue;  // the set is full: warming evicts nothing
      const int way = __shfl_sync(
          kFullMask, WarpVictimOrder(cache, VictimKey(cache, slot), free_ways, /*only_first=*/true),
          0);
      const int64_t to = SetOf(row, cache.num_sets) * kWays + way;
      const int table = TableOf(cache, row);
      WarpCopy(HomeRowAt(cache, table, row), SlotRowAt(cache, to), RowBytes(cache, table));
      if (lane == way) {
        cache.tags[to] = row;
        cache.timestamps[to] = timestep;
        cache.dirty[to] = 0;
      }
      __syncwarp();  // the next row of the set sees this one's way taken
    }
  }
}

}  // namespace

void InitializeCuda(const CacheArgs& cache, const int64_t* values, int64_t count, int64_t* meta,
                    int64_t* stats, int64_t stat_count, int device, void* stream) {
  static constexpr char kOp[] = "CachedTbe::Initialize";
  const ScopedDevice on_device(device);
  const cudaStream_t s = AsStream(stream);
  // From pageable memory: the call returns once the values are staged, so
  // the caller may free them at once.
  CudaCheckForOp(cudaMemcpyAsync(meta, values, count * sizeof(int64_t), cudaMemcpyHostToDevice, s),
                 "cudaMemcpyAsync of the tables meta", kOp);
  const int64_t slots = cache.num_sets * kWays;
  EmptySlotsKernel<<<GridFor(slots, kBlockThreads), kBlockThreads, 0, s>>>(cache);
  CudaCheckLaunch("EmptySlotsKernel", kOp);
  ZeroKernel<<<GridFor(stat_count, kBlockThreads), kBlockThreads, 0, s>>>(stats, stat_count);
  CudaCheckLaunch("ZeroKernel (statistics)", kOp);
  if (cache.counts != nullptr) {
    ZeroKernel<<<GridFor(cache.total_rows, kBlockThreads), kBlockThreads, 0, s>>>(cache.counts,
                                                                                  cache.total_rows);
    CudaCheckLaunch("ZeroKernel (LFU counts)", kOp);
  }
}

void ZeroCuda(int64_t* values, int64_t count, int device, void* stream) {
  if (count == 0) return;
  const ScopedDevice on_device(device);
  ZeroKernel<<<GridFor(count, kBlockThreads), kBlockThreads, 0, AsStream(stream)>>>(values, count);
  CudaCheckLaunch("ZeroKernel", "CachedTbe::NewLocations");
}

bool HomeIsMappedCuda(const void* home, int device) {
  const ScopedDevice on_device(device);
  cudaPointerAttributes attributes{};
  CudaCheckForOp(cudaPointerGetAttributes(&attributes, home),
                 "cudaPointerGetAttributes of the home", "CachedTbe");
  return attributes.type != cudaMemoryTypeManaged;
}

void ReadDeviceCuda(const void* from, void* to, int64_t bytes, int device) {
  const ScopedDevice on_device(device);
  CudaCheckForOp(cudaMemcpy(to, from, static_cast<std::size_t>(bytes), cudaMemcpyDeviceToHost),
                 "cudaMemcpy of the cache state to the host", "CachedTbe");
}

void FlushCuda(const CacheArgs& cache, int device, void* stream) {
  const ScopedDevice on_device(device);
  const int64_t slots = cache.num_sets * kWays;
  FlushKernel<<<GridFor(slots, kBlockWarps, 8192), kBlockThreads, 0, AsStream(stream)>>>(cache);
  CudaCheckLaunch("FlushKernel", "CachedTbe::Flush");
}

void ResetCuda(const CacheArgs& cache, int device, void* stream) {
  const ScopedDevice on_device(device);
  const int64_t slots = cache.num_sets * kWays;
  const cudaStream_t s = AsStream(stream);
  EmptySlotsKernel<<<GridFor(slots, kBlockThreads), kBlockThreads, 0, s>>>(cache);
  CudaCheckLaunch("EmptySlotsKernel", "CachedTbe::Reset");
  if (cache.counts != nullptr) {  // LFU's counts start again (FBGEMM's reset_cache_states)
    ZeroKernel<<<GridFor(cache.total_rows, kBlockThreads), kBlockThreads, 0, s>>>(cache.counts,
                                                                                  cache.total_rows);
    CudaCheckLaunch("ZeroKernel (LFU counts)", "CachedTbe::Reset");
  }
}

void WarmCuda(const CacheArgs& cache, const int64_t* rows, int64_t count, int64_t timestep,
              int device, void* stream) {
  static constexpr char kOp[] = "CachedTbe::Warm";
  if (count == 0) return;
  const ScopedDevice on_device(device);
  const cudaStream_t s = AsStream(stream);
  // Rows grouped by set, each set's in the given order, and where each
  // set's run starts (and the last ends).
  std::vector<int64_t> sets(static_cast<std::size_t>(count));
  for (int64_t i = 0; i < count; ++i) sets[i] = SetOf(rows[i], cache.num_sets);
  std::vector<int64_t> order(static_cast<std::size_t>(count));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return sets[a] < sets[b]; });
  std::vector<int64_t> staged;  // the rows, then the run starts
  staged.reserve(static_cast<std::size_t>(2 * count + 1));
  for (const int64_t i : order) staged.push_back(rows[i]);
  for (int64_t i = 0; i < count; ++i) {
    if (i == 0 || sets[order[i]] != sets[order[i - 1]]) staged.push_back(i);
  }
  const int64_t runs = static_cast<int64_t>(staged.size()) - count;
  staged.push_back(count);

  const std::size_t bytes = staged.size() * sizeof(int64_t);
  storage::Buffer pinned =
      storage::GetStorage(storage::MemoryKind::kPinned, device).Alloc(bytes, nullptr);
  std::memcpy(pinned.data(), staged.data(), bytes);
  storage::Buffer on_gpu =
      storage::GetStorage(storage::MemoryKind::kDevice, device).Alloc(bytes, s);
  CudaCheckForOp(cudaMemcpyAsync(on_gpu.data(), pinned.data(), bytes, cudaMemcpyHostToDevice, s),
                 "cudaMemcpyAsync of the rows to warm", kOp);
  pinned.RecordUse(s);
  const auto* gpu_rows = static_cast<const int64_t*>(on_gpu.data());
  WarmKernel<<<GridFor(runs, kBlockWarps, 8192), kBlockThreads, 0, s>>>(
      cache, gpu_rows, gpu_rows + count, runs, timestep);
  CudaCheckLaunch("WarmKernel", kOp);
  on_gpu.RecordUse(s);
}

}  // namespace ember::cache::internal
