#pragma once

// Communicator: one rank's end of the collectives that multi-GPU training
// needs. Sharded embedding tables send each batch's indices to the ranks
// that own their rows and the pooled embeddings back (all-to-all of
// variable sizes); the dense gradients are summed over ranks (all-reduce).
// NcclCommunicator (nccl_communicator.h) implements it on GPUs;
// InProcessCommunicatorGroup (in_process_communicator.h) implements it
// with threads as ranks, so that CI tests all of the logic without a GPU.
//
// Contract (NCCL's). Every rank calls the same collectives in the same
// order, each with the same `what`: collective n on one rank meets
// collective n on every other. A call blocks until this rank's part is
// done. `what` names the collective's purpose ("indices of batch 7") for
// the error messages; a rank that calls another collective than its peers
// is an error, not a silent exchange of wrong bytes.
//
// Errors. Each public method first checks this rank's own arguments
// (InvalidArgument, naming the rank and the collective). Before it throws,
// it aborts the group (Abort below): the peers would otherwise wait for
// this rank until their timeout. What an implementation checks across
// ranks (matching collectives and counts) and its timeouts are its own;
// after any failure, the group is broken and every later call throws.
//
// Thread safety: a rank's Communicator is used by one thread at a time (in
// practice the rank's in-order communication worker); the ranks' objects
// are used concurrently, which is their purpose.
//
// Memory ordering: when a call returns on rank r, what every rank wrote
// into its send buffer before its own call is in r's receive buffer, and
// r's send buffer is no longer read by any rank (r may reuse it).

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>

namespace ember::train {

class Communicator {
 public:
  // REQUIRES: 0 <= rank < world_size (the implementation checks it).
  Communicator(int rank, int world_size) : rank_(rank), world_size_(world_size) {}
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  [[nodiscard]] int rank() const { return rank_; }
  [[nodiscard]] int world_size() const { return world_size_; }

  // Communicator::AllToAllV sends send_bytes[p] bytes to each rank p, the
  // consecutive pieces of `send` in rank order (this rank's own piece is
  // copied), and receives recv_bytes[p] bytes from each rank p into
  // consecutive pieces of `recv`, in rank order. Blocks.
  // REQUIRES: both counts have world_size() entries, none negative, their
  // sums are send.size() and recv.size(); send_bytes[p] here equals
  // recv_bytes[rank()] on rank p; `send` and `recv` do not overlap.
  // Throws InvalidArgument for a count or size that breaks these (the
  // cross-rank one where the implementation can see it).
  void AllToAllV(std::span<const std::byte> send, std::span<const int64_t> send_bytes,
                 std::span<std::byte> recv, std::span<const int64_t> recv_bytes,
                 std::string_view what);

  // Communicator::AllToAllV<T>: the same, counted in elements of T.
  template <typename T>
  requires std::is_trivially_copyable_v<T>
  void AllToAllV(std::span<const T> send, std::span<const int64_t> send_counts, std::span<T> recv,
                 std::span<const int64_t> recv_counts, std::string_view what) {
    AllToAllVIn(std::as_bytes(send), send_counts, std::as_writable_bytes(recv), recv_counts,
                sizeof(T), what);
  }

  // Communicator::AllToAll<T>: every piece the same size, send.size() /
  // world_size() elements. Throws InvalidArgument unless send.size() is a
  // multiple of world_size() and recv.size() == send.size().
  template <typename T>
  requires std::is_trivially_copyable_v<T>
  void AllToAll(std::span<const T> send, std::span<T> recv, std::string_view what) {
    AllToAllIn(std::as_bytes(send), std::as_writable_bytes(recv), sizeof(T), what);
  }

  // Communicator::AllReduceSum replaces `data` with its sum over the ranks,
  // element by element, added in rank order: ((x0 + x1) + x2) + ... Every
  // rank gets the same bits, run after run, equal to a serial loop over the
  // ranks in that order (floating-point addition is not associative, so
  // any other order, e.g. NCCL's ring, would differ in the last bits).
  // REQUIRES: data.size() is the same on every rank. Blocks.
  void AllReduceSum(std::span<float> data, std::string_view what) { DoAllReduceSum(data, what); }

  // Communicator::AllReduceSum of several arrays in one collective, each
  // summed as above: a bucket (the dense gradients of a step), whose one
  // exchange costs one round trip where an array each would cost many.
  // REQUIRES: the same number of parts, of the same sizes, on every rank.
  void AllReduceSum(std::span<const std::span<float>> parts, std::string_view what) {
    DoAllReduceSumParts(parts, what);
  }

  // Communicator::Barrier returns once every rank has called it.
  void Barrier(std::string_view what) { DoBarrier(what); }

  // Communicator::IssueAfter: the next collective's operations start after
  // the work issued so far on `stream` (a cudaStream_t of this rank's GPU).
  // An Async engine's GPU op finds its inputs ordered on its own stream, not
  // yet finished on the host; a communicator that works on a stream of its
  // own (NCCL's) must follow that one first. A host communicator ignores it:
  // its op runs once its inputs are done. Does not throw where it ignores;
  // NcclCommunicator throws CudaError for a failed record or wait.
  void IssueAfter(void* stream) { DoIssueAfter(stream); }

  // Communicator::Break breaks the group on purpose, for a rank that cannot
  // take part as it should (the input of its next collective failed): its
  // peers' pending and later collectives fail at once, naming `reason`,
  // instead of receiving what the failed input left in its buffer, and so
  // do this rank's later calls. Returns whether this call broke it (false:
  // it was broken already, by an earlier failure). Does not throw.
  bool Break(std::string_view reason) noexcept { return Abort(reason); }

 protected:
  // The collectives, with this rank's arguments checked (counts in bytes).
  virtual void DoAllToAllV(std::span<const std::byte> send, std::span<const int64_t> send_bytes,
                           std::span<std::byte> recv, std::span<const int64_t> recv_bytes,
                           std::string_view what) = 0;
  virtual void DoAllReduceSum(std::span<float> data, std::string_view what) = 0;
  // By default one DoAllReduceSum per part, in order.
  virtual void DoAllReduceSumParts(std::span<const std::span<float>> parts, std::string_view what) {
    for (std::span<float> part : parts) DoAllReduceSum(part, what);
  }
  virtual void DoBarrier(std::string_view what) = 0;
  virtual void DoIssueAfter(void* /*stream*/) {}

  // Breaks the group because this rank failed its own checks (`error`, the
  // message it is about to throw) or gave up (Break), and will not join the
  // collective its peers wait in: they fail at once instead of at their
  // timeout (NCCL: ncclCommAbort). Returns false when the group was broken
  // already (its first failure stays the one reported). Does not throw.
  virtual bool Abort(std::string_view error) noexcept = 0;

 private:
  // AllToAllV and AllToAll with counts in elements of `unit` bytes.
  void AllToAllVIn(std::span<const std::byte> send, std::span<const int64_t> send_counts,
                   std::span<std::byte> recv, std::span<const int64_t> recv_counts, size_t unit,
                   std::string_view what);
  void AllToAllIn(std::span<const std::byte> send, std::span<std::byte> recv, size_t unit,
                  std::string_view what);
  // Aborts the group and throws InvalidArgument("[Communicator::<kind>]
  // rank <r>: '<what>': <problem>").
  [[noreturn]] void Reject(std::string_view kind, std::string_view what, std::string_view problem);

  const int rank_;
  const int world_size_;
};

}  // namespace ember::train
