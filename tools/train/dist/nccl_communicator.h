#pragma once

// NcclCommunicator: one rank's Communicator (communicator.h) over NCCL,
// one GPU per rank. The buffers of its calls are device memory of the
// rank's GPU, as NCCL takes them (the spans only carry pointer and size).
//
// Each call issues its NCCL operations on the communicator's own stream
// and returns when they finished, as the contract says: the caller is the
// rank's in-order communication worker, so only that worker waits, and
// NCCL sees the ranks' collectives in one order.
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
};

class NcclCommunicator final : public Communicator {
 public:
  // Joins the group of `id` as `rank` of `world_size` on GPU `device`.
  // Blocks until every rank has joined (ncclCommInitRank). Throws
  // InvalidArgument for a bad rank, world size, device or timeout, and
  // Unavailable when NCCL fails (naming its reason).
  NcclCommunicator(int rank, int world_size, int device, const NcclUniqueId& id,
                   const NcclCommunicatorOptions& options = {});
  ~NcclCommunicator() override;

  [[nodiscard]] int device() const { return device_; }

 protected:
  void DoAllToAllV(std::span<const std::byte> send, std::span<const int64_t> send_bytes,
                   std::span<std::byte> recv, std::span<const int64_t> recv_bytes,
                   std::string_view what) override;
  void DoAllReduceSum(std::span<float> data, std::string_view what) override;
  void DoBarrier(std::string_view what) override;
  bool Abort(std::string_view error) noexcept override;

 private:
  struct Nccl;  // NCCL's and CUDA's handles, kept out of this header

  const int device_;
  std::unique_ptr<Nccl> nccl_;
};

}  // namespace ember::train
