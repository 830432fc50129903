// NcclCommunicator over NCCL (nccl_communicator.h).

#include "tools/train/dist/nccl_communicator.h"

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
  // AllReduceSum's gathered pieces and Barrier's word, grown as needed.
  float* scratch = nullptr;
  size_t scratch_floats = 0;
  // The first failure; once set, every call throws it.
  std::string broken;

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
  void Run(std::string_view kind, int rank, int device, std::string_view what, Issue issue) {
    const std::string where =
        fmt::format("[NcclCommunicator::{}] rank {}: '{}': ", kind, rank, what);
    if (!broken.empty()) throw Unavailable(where + "the group is broken: " + broken);
    ScopedDevice on(device);
    const ncclResult_t issued = issue();
    std::string problem = issued == ncclSuccess
                              ? WaitFor(stream.get(), comm, timeout)
                              : fmt::format("NCCL error: {} ({})", ncclGetErrorString(issued),
                                            ncclGetLastError(comm));
    if (problem.empty()) return;
    problem = where + problem;
    Abort(problem);
    throw Unavailable(problem);
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
      options.timeout.count() <= 0) {
    throw InvalidArgument(fmt::format(
        "[NcclCommunicator] rank {} of {} on GPU {} (this process sees {}), timeout {} ms: "
        "expected 0 <= rank < world size, an existing GPU and a positive timeout",
        rank, world_size, device, devices, options.timeout.count()));
  }
  ScopedDevice on(device);
  nccl_->stream = CudaStream::Create("NcclCommunicator's stream");
  nccl_->timeout = options.timeout;
  ncclUniqueId raw;
  std::memcpy(&raw, id.bytes.data(), sizeof(raw));
  const ncclResult_t result = ncclCommInitRank(&nccl_->comm, world_size, raw, rank);
  if (result != ncclSuccess) {
    throw Unavailable(fmt::format("[NcclCommunicator] rank {} of {}: ncclCommInitRank: {} ({})",
                                  rank, world_size, ncclGetErrorString(result),
                                  ncclGetLastError(nullptr)));
  }
}

NcclCommunicator::~NcclCommunicator() {
  ScopedDevice on(device_);
  if (nccl_->comm != nullptr) ncclCommDestroy(nccl_->comm);
  if (nccl_->scratch != nullptr) CudaLogIfError(cudaFree(nccl_->scratch), "cudaFree of scratch");
}

bool NcclCommunicator::Abort(std::string_view error) noexcept { return nccl_->Abort(error); }

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
  nccl_->Run("AllToAllV", rank(), device_, what, issue);
}

void NcclCommunicator::DoAllReduceSum(std::span<float> data, std::string_view what) {
  const size_t need = data.size() * static_cast<size_t>(world_size());
  auto issue = [&]() -> ncclResult_t {
    if (need > nccl_->scratch_floats) {
      if (nccl_->scratch != nullptr) CudaCheck(cudaFree(nccl_->scratch), "cudaFree of scratch");
      nccl_->scratch = nullptr;
      nccl_->scratch_floats = 0;
      CudaCheck(cudaMalloc(&nccl_->scratch, need * sizeof(float)),
                "cudaMalloc of AllReduceSum's gathered data");
      nccl_->scratch_floats = need;
    }
    const ncclResult_t r = ncclAllGather(data.data(), nccl_->scratch, data.size(), ncclFloat,
                                         nccl_->comm, nccl_->stream.get());
    if (r == ncclSuccess) {
      RankOrderSum(nccl_->scratch, world_size(), static_cast<int64_t>(data.size()), data.data(),
                   nccl_->stream.get());
    }
    return r;
  };
  nccl_->Run("AllReduceSum", rank(), device_, what, issue);
}

void NcclCommunicator::DoBarrier(std::string_view what) {
  auto issue = [&]() -> ncclResult_t {
    if (nccl_->scratch_floats < 1) {
      CudaCheck(cudaMalloc(&nccl_->scratch, sizeof(float)), "cudaMalloc of Barrier's word");
      nccl_->scratch_floats = 1;
    }
    return ncclAllReduce(nccl_->scratch, nccl_->scratch, 1, ncclFloat, ncclSum, nccl_->comm,
                         nccl_->stream.get());
  };
  nccl_->Run("Barrier", rank(), device_, what, issue);
}

}  // namespace ember::train
