#pragma once

// NcclCommunicator: one rank's Communicator (communicator.h) over NCCL,
// one GPU per rank. The buffers of its calls are device memory of the
// rank's GPU, as NCCL takes them (the spans only carry pointer and size).
//
// Each call issues its NCCL operations on the communicator's own stream,
// at the device's highest priority (NCCL's blocks then start ahead of the
// queued blocks of the step's compute kernels, which the exchange runs
// beside), and returns when they finished, as the contract says: the
// caller is the rank's in-order communication worker, so only that worker
// waits, and NCCL sees the ranks' collectives in one order. Inputs that an
// engine op has ordered on its own stream (an Async engine) are followed
// with IssueAfter(op's stream) before the call.
//
// AllReduceSum adds in rank order, as the contract requires: NCCL's own
// reductions add in an order that depends on the topology (rings, trees),
// so the call gathers every rank's data (ncclAllGather) and one kernel adds
// the pieces in rank order, ((x0 + x1) + x2) + ... on every rank: the bits
// of a serial loop and of the in-process communicator. It moves G times the
// bytes of a reduction; dense gradients are small next to the embeddings'
// all-to-all.
//
// Errors. A call whose NCCL operations fail, report an asynchronous error
// or do not finish within the timeout (a peer that never comes) aborts the
// communicator (ncclCommAbort: no rank is left waiting on this one) and
// throws Unavailable naming the rank, the collective and NCCL's reason;
// every later call throws at once, naming that first failure. A build
// without NCCL (no CUDA) has the type but its constructor throws
// Unavailable (NcclAvailable says which build this is).
//
// Thread safety: as the Communicator contract: one thread per rank's
// object, the ranks' objects concurrently (one process may drive every GPU
// of its host, a rank per GPU, each created on its own thread).

#include <array>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tools/train/dist/communicator.h"

namespace ember::train {

// Whether this build has NCCL.
bool NcclAvailable();

// The id that names one NCCL group: rank 0 makes it and every rank gets it
// (in one process, by copy; across processes, through the launch's
// rendezvous file as hex: docs/train.md, "Several GPUs").
struct NcclUniqueId {
  std::array<std::byte, 128> bytes{};  // ncclUniqueId's

  // A fresh id (ncclGetUniqueId). Throws Unavailable without NCCL.
  static NcclUniqueId Create();
  // 256 lowercase hex digits, and back; FromHex throws InvalidArgument
  // for anything else, naming what it got.
  [[nodiscard]] std::string ToHex() const;
  static NcclUniqueId FromHex(std::string_view hex);
};

struct NcclCommunicatorOptions {
  // How long one call waits for its NCCL operations, > 0.
  std::chrono::milliseconds timeout{60'000};
  // Time every collective on the GPU (an event before its first operation
  // and one after its last) for timings(); costs two event records a call.
  bool record_timings = false;
  // The largest AllReduceSum a call will make (all its parts), in floats:
  // its scratch (world size times that) is made in the constructor. A
  // larger call grows the scratch with a cudaMalloc, which takes the
  // driver's lock while the peers' collectives run; a process that drives
  // several GPUs keeps such calls out of its steps (docs/train.md,
  // "Several GPUs").
  int64_t all_reduce_floats = 0;
};

// One collective as the GPU ran it (NcclCommunicatorOptions::record_timings).
// The time starts when the communicator's stream reaches the collective, so
// it includes waiting for peers that came later.
struct CollectiveTiming {
  std::string what;
  int64_t bytes = 0;  // AllToAllV: sent to other ranks; AllReduceSum: reduced
  double seconds = 0;
};

class NcclCommunicator final : public Communicator {
 public:
  // Joins the group of `id` as `rank` of `world_size` on GPU `device`.
  // Blocks until every rank has joined (ncclCommInitRank) and is connected
  // to it (a collective of each kind, unrecorded). Makes all of its device
  // memory before the first of those. Throws InvalidArgument for a bad
  // rank, world size, device, timeout or all_reduce_floats, and
  // Unavailable when NCCL fails (naming its reason).
  NcclCommunicator(int rank, int world_size, int device, const NcclUniqueId& id,
                   const NcclCommunicatorOptions& options = {});
  ~NcclCommunicator() override;

  [[nodiscard]] int device() const { return device_; }
  // The collectives timed so far, in call order (empty unless
  // record_timings). REQUIRES: no call in flight (the rank's thread).
  [[nodiscard]] const std::vector<CollectiveTiming>& timings() const;

 protected:
  void DoAllToAllV(std::span<const std::byte> send, std::span<const int64_t> send_bytes,
                   std::span<std::byte> recv, std::span<const int64_t> recv_bytes,
                   std::string_view what) override;
  void DoAllReduceSum(std::span<float> data, std::string_view what) override;
  // One NCCL group of all-gathers, then the rank-order sums: one round trip.
  void DoAllReduceSumParts(std::span<const std::span<float>> parts, std::string_view what) override;
  void DoBarrier(std::string_view what) override;
  // Makes the communicator's stream wait for the work issued so far on
  // `stream` (an event, no host wait).
  void DoIssueAfter(void* stream) override;
  bool Abort(std::string_view error) noexcept override;

 private:
  struct Nccl;  // NCCL's and CUDA's handles, kept out of this header

  // One collective of each kind, so that NCCL connects the peers while
  // every rank is known to be there; `buffer` holds a float, then two
  // bytes per rank.
  void Connect(std::byte* buffer);

  const int device_;
  std::unique_ptr<Nccl> nccl_;
};

}  // namespace ember::train
