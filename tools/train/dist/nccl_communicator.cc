// NcclCommunicator over NCCL (nccl_communicator.h).

#include "tools/train/dist/nccl_communicator.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <utility>

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nccl.h>

#include "engine/cuda/check.h"
#include "engine/cuda/handles.h"
#include "engine/cuda/scoped_device.h"
#include "engine/error.h"
#include "tools/train/dist/rank_order_sum.h"

namespace ember::train {

static_assert(sizeof(ncclUniqueId) == sizeof(NcclUniqueId::bytes));

namespace {

// Polls until `stream` is idle; between polls, NCCL's asynchronous error.
// Returns "" or what went wrong.
std::string WaitFor(cudaStream_t stream, ncclComm_t comm, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const cudaError_t status = cudaStreamQuery(stream);
    if (status == cudaSuccess) return "";
    if (status != cudaErrorNotReady) {
      return fmt::format("CUDA error {} ({})", cudaGetErrorName(status),
                         cudaGetErrorString(status));
    }
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm, &async);
    if (async != ncclSuccess && async != ncclInProgress) {
      return fmt::format("NCCL error: {} ({})", ncclGetErrorString(async), ncclGetLastError(comm));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return fmt::format(
          "not finished after {} ms: a peer that never came, or a mismatch in "
          "the ranks' collectives",
          timeout.count());
    }
    std::this_thread::yield();
  }
}

}  // namespace

struct NcclCommunicator::Nccl {
  ncclComm_t comm = nullptr;
  CudaStream stream;
  std::chrono::milliseconds timeout{};
  // AllReduceSum's gathered pieces and Barrier's word, grown as needed:
  // the newest of the scratch buffers made; every buffer made (Make) is
  // kept until the end.
  float* scratch = nullptr;
  size_t scratch_floats = 0;
  std::vector<void*> made;
  // The first failure; once set, every call throws it.
  std::string broken;
  // IssueAfter's event, and the timing pair (record_timings).
  CudaEvent follow, started, finished;
  bool record_timings = false;
  std::vector<CollectiveTiming> timings;

  ~Nccl() {
    for (void* data : made) CudaLogIfError(cudaFree(data), "cudaFree of NcclCommunicator's memory");
  }

  // Device memory of the communicator's, freed only at the end: a cudaFree
  // synchronizes the device under the driver's locks, a known source of
  // deadlocks beside NCCL kernels that wait for another rank of the same
  // process, so none happens mid-run.
  void* Make(size_t bytes, std::string_view what) {
    made.reserve(made.size() + 1);  // so that nothing throws past the cudaMalloc
    void* data = nullptr;
    CudaCheck(cudaMalloc(&data, bytes), fmt::format("cudaMalloc of {}", what));
    made.push_back(data);
    return data;
  }

  // Grows the scratch to `floats` (a call's own: the stream is idle
  // between calls).
  void Reserve(size_t floats) {
    if (floats <= scratch_floats) return;
    scratch = static_cast<float*>(Make(floats * sizeof(float), "the collectives' scratch"));
    scratch_floats = floats;
  }

  bool Abort(std::string_view error) noexcept {
    const bool was_whole = broken.empty();
    if (was_whole) broken = std::string(error);
    if (comm != nullptr) ncclCommAbort(comm);
    comm = nullptr;
    return was_whole;
  }

  // Runs `issue` (the NCCL calls of one collective, returning the first
  // failure) on the stream and waits for it; a failure aborts the group
  // and throws Unavailable "[NcclCommunicator::<kind>] rank r: 'what': ...".
  template <typename Issue>
  void Run(std::string_view kind, int rank, int device, std::string_view what, int64_t bytes,
           Issue issue) {
    const std::string where =
        fmt::format("[NcclCommunicator::{}] rank {}: '{}': ", kind, rank, what);
    if (!broken.empty()) throw Unavailable(where + "the group is broken: " + broken);
    ScopedDevice on(device);
    if (record_timings) CudaCheck(cudaEventRecord(started.get(), stream.get()), where);
    const ncclResult_t issued = issue();
    if (record_timings) CudaCheck(cudaEventRecord(finished.get(), stream.get()), where);
    std::string problem = issued == ncclSuccess
                              ? WaitFor(stream.get(), comm, timeout)
                              : fmt::format("NCCL error: {} ({})", ncclGetErrorString(issued),
                                            ncclGetLastError(comm));
    if (problem.empty()) {
      if (record_timings) Record(what, bytes);
      return;
    }
    problem = where + problem;
    Abort(problem);
    throw Unavailable(problem);
  }

  void Record(std::string_view what, int64_t bytes) {
    float ms = 0;
    CudaCheck(cudaEventElapsedTime(&ms, started.get(), finished.get()),
              "cudaEventElapsedTime of a collective");
    timings.push_back({std::string(what), bytes, ms / 1e3});
  }
};

bool NcclAvailable() { return true; }

NcclUniqueId NcclUniqueId::Create() {
  ncclUniqueId raw;
  const ncclResult_t result = ncclGetUniqueId(&raw);
  if (result != ncclSuccess) {
    throw Unavailable(
        fmt::format("[NcclUniqueId::Create] ncclGetUniqueId: {}", ncclGetErrorString(result)));
  }
  NcclUniqueId id;
  std::memcpy(id.bytes.data(), &raw, sizeof(raw));
  return id;
}

NcclCommunicator::NcclCommunicator(int rank, int world_size, int device, const NcclUniqueId& id,
                                   const NcclCommunicatorOptions& options)
    : Communicator(rank, world_size), device_(device), nccl_(std::make_unique<Nccl>()) {
  int devices = 0;
  CudaCheck(cudaGetDeviceCount(&devices), "cudaGetDeviceCount for NcclCommunicator");
  if (rank < 0 || world_size < 1 || rank >= world_size || device < 0 || device >= devices ||
      options.timeout.count() <= 0 || options.all_reduce_floats < 0) {
    throw InvalidArgument(fmt::format(
        "[NcclCommunicator] rank {} of {} on GPU {} (this process sees {}), timeout {} ms, "
        "all_reduce_floats {}: expected 0 <= rank < world size, an existing GPU, a positive "
        "timeout and a count >= 0",
        rank, world_size, device, devices, options.timeout.count(), options.all_reduce_floats));
  }
  ScopedDevice on(device);
  nccl_->stream = CudaStream::CreateUrgent("NcclCommunicator's stream");
  nccl_->follow = CudaEvent::Create("NcclCommunicator's IssueAfter event");
  nccl_->timeout = options.timeout;
  if (options.record_timings) {
    nccl_->started = CudaEvent::Create("NcclCommunicator's timing event", cudaEventDefault);
    nccl_->finished = CudaEvent::Create("NcclCommunicator's timing event", cudaEventDefault);
  }
  const auto floats = static_cast<size_t>(std::max<int64_t>(options.all_reduce_floats, 1));
  nccl_->Reserve(floats * static_cast<size_t>(world_size));
  // A float (aligned, at the start), then a byte to send and one to
  // receive per rank.
  auto* connection = static_cast<std::byte*>(nccl_->Make(
      sizeof(float) + 2 * static_cast<size_t>(world_size), "NcclCommunicator's connection"));
  ncclUniqueId raw;
  std::memcpy(&raw, id.bytes.data(), sizeof(raw));
  const ncclResult_t result = ncclCommInitRank(&nccl_->comm, world_size, raw, rank);
  if (result != ncclSuccess) {
    throw Unavailable(fmt::format("[NcclCommunicator] rank {} of {}: ncclCommInitRank: {} ({})",
                                  rank, world_size, ncclGetErrorString(result),
                                  ncclGetLastError(nullptr)));
  }
  Connect(connection);
  nccl_->record_timings = options.record_timings;
}

void NcclCommunicator::Connect(std::byte* buffer) {
  // NCCL connects peers on their first collective of each kind, and that
  // call blocks on the host until the peers take part, out of the
  // timeout's reach (a peer that never came would hang it). Every rank is
  // here now (ncclCommInitRank returned): one collective of each kind the
  // communicator issues connects them, so that later calls wait on the
  // GPU, where the timeout applies.
  const auto n = static_cast<size_t>(world_size());
  std::byte* bytes = buffer + sizeof(float);
  const std::vector<int64_t> ones(n, 1);
  DoAllToAllV({bytes, n}, ones, {bytes + n, n}, ones, "connect");
  DoAllReduceSum({reinterpret_cast<float*>(buffer), 1}, "connect");
  DoBarrier("connect");
}

NcclCommunicator::~NcclCommunicator() {
  ScopedDevice on(device_);
  if (nccl_->comm != nullptr) ncclCommDestroy(nccl_->comm);
}

bool NcclCommunicator::Abort(std::string_view error) noexcept { return nccl_->Abort(error); }

const std::vector<CollectiveTiming>& NcclCommunicator::timings() const { return nccl_->timings; }

void NcclCommunicator::DoIssueAfter(void* stream) {
  if (stream == nullptr) return;
  ScopedDevice on(device_);
  CudaCheck(cudaEventRecord(nccl_->follow.get(), static_cast<cudaStream_t>(stream)),
            "cudaEventRecord for NcclCommunicator::IssueAfter");
  CudaCheck(cudaStreamWaitEvent(nccl_->stream.get(), nccl_->follow.get(), 0),
            "cudaStreamWaitEvent for NcclCommunicator::IssueAfter");
}

void NcclCommunicator::DoAllToAllV(std::span<const std::byte> send,
                                   std::span<const int64_t> send_bytes, std::span<std::byte> recv,
                                   std::span<const int64_t> recv_bytes, std::string_view what) {
  auto issue = [&]() -> ncclResult_t {
    ncclResult_t r = ncclGroupStart();
    size_t send_at = 0, recv_at = 0;
    for (int p = 0; p < world_size() && r == ncclSuccess; ++p) {
      const auto s = static_cast<size_t>(send_bytes[p]);
      const auto v = static_cast<size_t>(recv_bytes[p]);
      if (s > 0) {
        r = ncclSend(send.data() + send_at, s, ncclUint8, p, nccl_->comm, nccl_->stream.get());
      }
      if (v > 0 && r == ncclSuccess) {
        r = ncclRecv(recv.data() + recv_at, v, ncclUint8, p, nccl_->comm, nccl_->stream.get());
      }
      send_at += s;
      recv_at += v;
    }
    const ncclResult_t ended = ncclGroupEnd();
    return r != ncclSuccess ? r : ended;
  };
  int64_t sent = 0;
  for (int p = 0; p < world_size(); ++p) sent += p == rank() ? 0 : send_bytes[p];
  nccl_->Run("AllToAllV", rank(), device_, what, sent, issue);
}

void NcclCommunicator::DoAllReduceSum(std::span<float> data, std::string_view what) {
  const std::span<float> one[] = {data};
  DoAllReduceSumParts(one, what);
}

void NcclCommunicator::DoAllReduceSumParts(std::span<const std::span<float>> parts,
                                           std::string_view what) {
  const auto ranks = static_cast<size_t>(world_size());
  size_t total = 0;
  for (std::span<float> part : parts) total += part.size();
  auto issue = [&]() -> ncclResult_t {
    if (ranks == 1) return ncclSuccess;  // the sum of one rank's data is the data
    nccl_->Reserve(total * ranks);
    // Part k's pieces, rank by rank, at its offset times the ranks.
    ncclResult_t r = ncclGroupStart();
    size_t at = 0;
    for (std::span<float> part : parts) {
      if (r == ncclSuccess && !part.empty()) {
        r = ncclAllGather(part.data(), nccl_->scratch + at * ranks, part.size(), ncclFloat,
                          nccl_->comm, nccl_->stream.get());
      }
      at += part.size();
    }
    const ncclResult_t ended = ncclGroupEnd();
    if (r != ncclSuccess || ended != ncclSuccess) return r != ncclSuccess ? r : ended;
    at = 0;
    for (std::span<float> part : parts) {
      RankOrderSum(nccl_->scratch + at * ranks, world_size(), static_cast<int64_t>(part.size()),
                   part.data(), nccl_->stream.get());
      at += part.size();
    }
    return ncclSuccess;
  };
  nccl_->Run("AllReduceSum", rank(), device_, what, static_cast<int64_t>(total * sizeof(float)),
             issue);
}

void NcclCommunicator::DoBarrier(std::string_view what) {
  auto issue = [&]() -> ncclResult_t {
    nccl_->Reserve(1);
    return ncclAllReduce(nccl_->scratch, nccl_->scratch, 1, ncclFloat, ncclSum, nccl_->comm,
                         nccl_->stream.get());
  };
  nccl_->Run("Barrier", rank(), device_, what, 0, issue);
}

}  // namespace ember::train
