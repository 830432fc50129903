// The check kernels of a TBE batch (embedding_bag_kernels.h): the
// stream's fault record, marking the first bad bag (a pass of its own; the
// forward marks as it reads instead), describing that bag's fault as the
// CPU kernels would, straight into pinned host memory, and resetting the
// record. Nothing waits for it here (tbe_fault.h says who reads it, and
// when).

#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/error.h"
#include "ops/internal/cuda_launch.cuh"
#include "ops/internal/embedding_bag_fault.h"
#include "ops/internal/embedding_bag_kernels.h"

namespace ember::ops::internal {
namespace {

constexpr int kWarp = 32;
constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / kWarp;
constexpr unsigned kFullMask = 0xffffffffu;

// One warp per bag: marks the bag bad (atomicMin of g) when its offsets or
// any of its indices are.
template <typename Index>
__global__ void __launch_bounds__(kThreads)
    FindFaultKernel(const TbeArgs args, const Index* indices, const Index* offsets,
                    unsigned long long* first_bad) {
  const int64_t num_bags = int64_t{args.num_tables} * args.batch_size;
  const int64_t g = int64_t{blockIdx.x} * kWarpsPerBlock + threadIdx.x / kWarp;
  if (g >= num_bags) return;
  const int lane = threadIdx.x % kWarp;
  const int t = static_cast<int>(g / args.batch_size);
  const int64_t start = offsets[g];
  const int64_t end = offsets[g + 1];
  bool bad =
      CheckBagOffsets(t, g - t * args.batch_size, g, num_bags, start, end, args.num_indices).kind !=
      TbeFaultKind::kNone;
  if (!bad) {
    const int64_t rows = args.rows[t];
    bool lane_bad = false;
    for (int64_t i = start + lane; i < end; i += kWarp) {
      lane_bad |= !IndexInRange(int64_t{indices[i]}, rows);
    }
    bad = __any_sync(kFullMask, lane_bad);
  }
  if (bad && lane == 0) atomicMin(first_bad, static_cast<unsigned long long>(g));
}

// One warp: describes the fault of bag *first_bad_bag, as the CPU would,
// into `host` (pinned host memory, which the GPU writes directly: a copy on
// the stream cost the op more than this kernel), and resets the record for
// the stream's next op (a memset of its own cost a launch per op).
template <typename Index>
__global__ void DescribeFaultKernel(const TbeArgs args, const Index* indices, const Index* offsets,
                                    unsigned long long* first_bad_bag, TbeFault* host) {
  const int lane = threadIdx.x;
  const unsigned long long first_bad = *first_bad_bag;
  TbeFault fault;
  if (first_bad != kTbeNoBadBag) {
    const auto g = static_cast<int64_t>(first_bad);
    const int t = static_cast<int>(g / args.batch_size);
    const int64_t start = offsets[g];
    const int64_t end = offsets[g + 1];
    fault =
        CheckBagOffsets(t, g - t * args.batch_size, g, int64_t{args.num_tables} * args.batch_size,
                        start, end, args.num_indices);
    for (int64_t base = start; fault.kind == TbeFaultKind::kNone && base < end; base += kWarp) {
      const int64_t i = base + lane;
      const int64_t index = i < end ? int64_t{indices[i]} : 0;
      const unsigned bad = __ballot_sync(kFullMask, i < end && !IndexInRange(index, args.rows[t]));
      if (bad == 0) continue;
      const int first = __ffs(bad) - 1;
      fault.kind = TbeFaultKind::kIndexOutOfRange;
      fault.position = __shfl_sync(kFullMask, i, first);
      fault.value = __shfl_sync(kFullMask, index, first);
      fault.bound = args.rows[t];
    }
  }
  __syncwarp();  // every lane has read the record
  if (lane == 0) {
    *host = fault;
    *first_bad_bag = kTbeNoBadBag;
  }
}

template <typename Index>
void LaunchMark(const TbeArgs& args, const Index* indices, const Index* offsets,
                unsigned long long* first_bad, cudaStream_t stream) {
  const int64_t num_bags = int64_t{args.num_tables} * args.batch_size;
  const int64_t blocks = (num_bags + kWarpsPerBlock - 1) / kWarpsPerBlock;
  if (blocks > INT_MAX) {
    throw InvalidArgument("[" + std::string(TbeOpName(args)) + "] " + std::to_string(num_bags) +
                          " bags are more than one launch can take");
  }
  if (blocks == 0) return;
  FindFaultKernel<Index>
      <<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(args, indices, offsets, first_bad);
  CudaCheckLaunch("FindFaultKernel", TbeOpName(args));
}

// The calling thread's records, one a (device, stream). Freed with the
// thread; at process exit the CUDA context may be gone first, and
// cudaFree's error then means nothing to report.
class StreamFaultRecords {
 public:
  StreamFaultRecords() = default;
  StreamFaultRecords(const StreamFaultRecords&) = delete;
  StreamFaultRecords& operator=(const StreamFaultRecords&) = delete;
  ~StreamFaultRecords() {
    for (const Entry& e : entries_) cudaFree(e.record);
  }

  TbeFaultRecord* Get(int device, void* stream) {
    for (const Entry& e : entries_) {
      if (e.device == device && e.stream == stream) return e.record;
    }
    TbeFaultRecord* record = nullptr;
    CudaCheck(cudaMalloc(&record, sizeof(TbeFaultRecord)), "cudaMalloc of a TBE fault record");
    entries_.push_back({device, stream, record});
    CudaCheck(cudaMemsetAsync(record, 0xff, sizeof(TbeFaultRecord), AsStream(stream)),
              "cudaMemsetAsync of a new TBE fault record");
    return record;
  }

 private:
  struct Entry {
    int device;
    void* stream;
    TbeFaultRecord* record;
  };
  std::vector<Entry> entries_;
};

}  // namespace

TbeFaultRecord* TbeStreamFaultRecordCuda(int device, void* stream) {
  thread_local StreamFaultRecords records;
  return records.Get(device, stream);
}

void TbeResetFaultCuda(const TbeArgs& args, TbeFaultRecord* record, void* stream) {
  CudaCheckForOp(
      cudaMemsetAsync(&record->first_bad, 0xff, sizeof(record->first_bad), AsStream(stream)),
      "cudaMemsetAsync of the fault record", TbeOpName(args));
}

void TbeMarkBadBagsCuda(const TbeArgs& args, unsigned long long* first_bad, void* stream) {
  if (args.offsets32 != nullptr) {
    LaunchMark(args, args.indices32, args.offsets32, first_bad, AsStream(stream));
  } else {
    LaunchMark(args, args.indices64, args.offsets64, first_bad, AsStream(stream));
  }
}

void TbeDescribeFaultCuda(const TbeArgs& args, TbeFaultRecord* record, TbeFault* host,
                          void* stream) {
  const cudaStream_t s = AsStream(stream);
  if (args.offsets32 != nullptr) {
    DescribeFaultKernel<<<1, kWarp, 0, s>>>(args, args.indices32, args.offsets32,
                                            &record->first_bad, host);
  } else {
    DescribeFaultKernel<<<1, kWarp, 0, s>>>(args, args.indices64, args.offsets64,
                                            &record->first_bad, host);
  }
  CudaCheckLaunch("DescribeFaultKernel", TbeOpName(args));
}

}  // namespace ember::ops::internal
