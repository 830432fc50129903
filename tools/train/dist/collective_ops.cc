#include "tools/train/dist/collective_ops.h"

#include <cstddef>
#include <span>
#include <utility>

#include <fmt/format.h>

#include "engine/error.h"

namespace ember::train {
namespace {

using storage::DType;
using storage::MemoryKind;
using storage::Tensor;

bool IsHost(const Tensor& t) {
  return t.kind() == MemoryKind::kCpu || t.kind() == MemoryKind::kPinned;
}

void CheckHost(const Tensor& t, const char* name, const std::string& what) {
  if (!t || !IsHost(t)) {
    throw InvalidArgument(fmt::format(
        "[CollectiveOps] '{}': `{}` must be a host tensor (kCpu or kPinned){}", what, name,
        t ? fmt::format(", not {}", storage::ToString(t.kind())) : std::string()));
  }
}

// The data of a collective: host memory on the CPU, the GPU's own memory on
// a GPU (what NCCL takes).
void CheckOn(engine::Context ctx, const Tensor& t, const char* name, const std::string& what) {
  if (!ctx.is_gpu()) return CheckHost(t, name, what);
  if (!t || t.kind() != MemoryKind::kDevice || t.ctx() != ctx) {
    throw InvalidArgument(fmt::format(
        "[CollectiveOps] '{}': `{}` must be device memory of {}{}", what, name, ctx.ToString(),
        t ? fmt::format(", not {} on {}", storage::ToString(t.kind()), t.ctx().ToString())
          : std::string()));
  }
}

void CheckCounts(const Tensor& t, const char* name, int world_size, const std::string& what) {
  CheckHost(t, name, what);
  if (t.dtype() != DType::kI64 || t.numel() != world_size) {
    throw InvalidArgument(
        fmt::format("[CollectiveOps] '{}': `{}` must be i64 of {} entries (one "
                    "per rank), not {} of {}",
                    what, name, world_size, storage::ToString(t.dtype()), t.numel()));
  }
}

// Counts (i64 elements of `unit` bytes) as bytes.
std::vector<int64_t> BytesOf(const int64_t* counts, int n, std::size_t unit) {
  std::vector<int64_t> bytes(counts, counts + n);
  for (int64_t& b : bytes) b *= static_cast<int64_t>(unit);
  return bytes;
}

// The first `counts` bytes of `buffer`: the part a collective moves. Where
// the counts add up past the buffer, all of it, which the communicator
// refuses (breaking the group, so that the peers do not wait for this rank).
std::span<std::byte> Covered(std::span<std::byte> buffer, const std::vector<int64_t>& counts) {
  int64_t sum = 0;
  for (int64_t c : counts) sum += c;
  return sum >= 0 && static_cast<std::size_t>(sum) <= buffer.size()
             ? buffer.first(static_cast<std::size_t>(sum))
             : buffer;
}

// What an op keeps of a tensor: its buffer outlives the op (tensor.h), the
// Tensor object need not.
std::span<std::byte> BufferOf(const Tensor& t) {
  return {static_cast<std::byte*>(t.data()), t.bytes()};
}

// A collective whose input failed breaks the group (peers fail at once
// instead of receiving what the failed op left) and returns true: the
// op then ends without sending, and its outputs carry the input's error.
// False where the group was broken already (the input's error is an
// earlier collective's, through the order var): the op then calls the
// communicator, which fails at once naming this collective, so that it
// never ends as if it had run.
bool BreakFor(Communicator& comm, const std::string& what) {
  return comm.Break(fmt::format("the input of '{}' failed on rank {} (its own wait reports why)",
                                what, comm.rank()));
}

}  // namespace

CollectiveOps::CollectiveOps(engine::Engine& engine, Communicator& comm, engine::Context ctx)
    : engine_(engine), comm_(comm), ctx_(ctx), order_(engine.NewVariable()) {}

CollectiveOps::~CollectiveOps() { engine_.DeleteVariable(order_); }

void CollectiveOps::AllToAllV(const Tensor& send, const Tensor& send_counts, const Tensor& recv,
                              const Tensor& recv_counts, std::string what) {
  CheckOn(ctx_, send, "send", what);
  CheckOn(ctx_, recv, "recv", what);
  CheckCounts(send_counts, "send_counts", comm_.world_size(), what);
  CheckCounts(recv_counts, "recv_counts", comm_.world_size(), what);
  if (send.dtype() != recv.dtype()) {
    throw InvalidArgument(fmt::format("[CollectiveOps] '{}': send is {} but recv is {}", what,
                                      storage::ToString(send.dtype()),
                                      storage::ToString(recv.dtype())));
  }
  const std::size_t unit = storage::SizeOf(send.dtype());
  auto run = [&comm = comm_, send = BufferOf(send), recv = BufferOf(recv),
              send_counts = send_counts.data<int64_t>(), recv_counts = recv_counts.data<int64_t>(),
              unit, what](engine::RunContext ctx) {
    if (ctx.input_failed && BreakFor(comm, what)) return;
    comm.IssueAfter(ctx.stream);
    const int n = comm.world_size();
    const std::vector<int64_t> send_bytes = BytesOf(send_counts, n, unit);
    const std::vector<int64_t> recv_bytes = BytesOf(recv_counts, n, unit);
    comm.AllToAllV(Covered(send, send_bytes), send_bytes, Covered(recv, recv_bytes), recv_bytes,
                   what);
  };
  engine_.PushSync(std::move(run), {send.var(), send_counts.var(), recv_counts.var()},
                   {recv.var(), order_},
                   {.ctx = ctx_, .prop = engine::FnProperty::kNoSkip, .name = "AllToAllV"});
}

void CollectiveOps::AllReduceSum(const Tensor& data, std::string what) {
  AllReduceSum(std::vector<const Tensor*>{&data}, std::move(what));
}

void CollectiveOps::AllReduceSum(const std::vector<const Tensor*>& data, std::string what) {
  std::vector<std::span<float>> parts;
  std::vector<engine::VarHandle> written = {order_};
  for (const Tensor* t : data) {
    CheckOn(ctx_, *t, "data", what);
    if (t->dtype() != DType::kF32) {
      throw InvalidArgument(fmt::format("[CollectiveOps] '{}': AllReduceSum takes f32, not {}",
                                        what, storage::ToString(t->dtype())));
    }
    parts.emplace_back(t->data<float>(), t->numel());
    written.push_back(t->var());
  }
  auto run = [&comm = comm_, parts = std::move(parts), what](engine::RunContext ctx) {
    if (ctx.input_failed && BreakFor(comm, what)) return;
    comm.IssueAfter(ctx.stream);
    comm.AllReduceSum(std::span<const std::span<float>>(parts), what);
  };
  engine_.PushSync(std::move(run), {}, written,
                   {.ctx = ctx_, .prop = engine::FnProperty::kNoSkip, .name = "AllReduceSum"});
}

void CollectiveOps::Barrier(std::string what) {
  auto run = [&comm = comm_, what = std::move(what)](engine::RunContext ctx) {
    if (ctx.input_failed && BreakFor(comm, what)) return;
    comm.Barrier(what);
  };
  engine_.PushSync(std::move(run), {}, {order_},
                   {.ctx = ctx_, .prop = engine::FnProperty::kNoSkip, .name = "Barrier"});
}

}  // namespace ember::train
