#pragma once

// CollectiveOps: one rank's collectives (communicator.h) pushed as engine
// ops, so that a sharded step stays a push order like any other.
//
// Order. A communicator needs every rank to issue its collectives in the
// same order (NCCL deadlocks otherwise), and the engine may run two
// independent ops in either order. Every collective of a rank therefore
// also writes that rank's order var: the engine runs them in push order,
// one at a time, and ranks that push the same sequence issue the same
// sequence; what is not a collective still overlaps them freely.
//
// Errors. A collective that fails (a mismatch, a peer that never comes) is
// its op's error, worded by the communicator with the rank and the
// collective, and breaks the group: every later collective on every rank
// fails at once, so no rank hangs. A collective whose input carries an
// error still runs (kNoSkip), but only to break the group
// (Communicator::Break): its peers, which would otherwise wait for it until
// their timeout or receive what the failed op left in its buffer, fail at
// once naming this rank and the collective, and its own outputs pass the
// input's error on (the rank's wait reports the original error). Where the
// group was broken already (the error came through the order var from a
// failed collective), the collective fails at once in its own name.
//
// Data. The communicator's memory on the rank's context: host tensors (kCpu
// or kPinned) on the CPU, the GPU's device memory (kDevice) on a GPU, where
// the ops run on that GPU's workers and the communicator follows the op's
// stream (Communicator::IssueAfter). Counts are i64 host tensors of
// world_size entries read when the op runs, so they may come from an
// earlier collective (the lengths, then the indices).
//
// Thread safety: one thread pushes a rank's collectives (their order is
// the push order); the ranks' objects are independent.

#include <string>
#include <vector>

#include "engine/engine.h"
#include "storage/tensor.h"
#include "tools/train/dist/communicator.h"

namespace ember::train {

class CollectiveOps {
 public:
  // The collectives of `comm` on `ctx` (the CPU for a host communicator,
  // the rank's GPU for NCCL). REQUIRES: `engine` and `comm` outlive this
  // object and every op it pushed (WaitForAll before destroying them).
  CollectiveOps(engine::Engine& engine, Communicator& comm,
                engine::Context ctx = engine::Context::CPU());

  [[nodiscard]] engine::Context ctx() const { return ctx_; }
  ~CollectiveOps();
  CollectiveOps(const CollectiveOps&) = delete;
  CollectiveOps& operator=(const CollectiveOps&) = delete;

  // Communicator::AllToAllV of `send`'s elements into `recv`, counted in
  // elements by `send_counts` and `recv_counts`. Throws InvalidArgument at
  // push for tensors that are not in ctx()'s memory, dtypes that differ or
  // counts that are not i64 of world_size entries; counts whose sums
  // exceed the tensors are the op's error when it runs.
  void AllToAllV(const storage::Tensor& send, const storage::Tensor& send_counts,
                 const storage::Tensor& recv, const storage::Tensor& recv_counts, std::string what);

  // Communicator::AllReduceSum of `data` (f32) in place, in rank order.
  void AllReduceSum(const storage::Tensor& data, std::string what);
  // The same for several tensors in one collective (a bucket).
  void AllReduceSum(const std::vector<const storage::Tensor*>& data, std::string what);

  // Communicator::Barrier: done on every rank once every rank got there.
  void Barrier(std::string what);

 private:
  engine::Engine& engine_;
  Communicator& comm_;
  const engine::Context ctx_;
  engine::VarHandle order_;
};

}  // namespace ember::train
