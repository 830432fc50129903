#pragma once

// PooledExchange: the pooled rows' way between a sharded TBE's owners and
// the ranks that use them, on the rank's context (sharded_tbe.h): after
// the output all-to-all, the owners' blocks into the rank's [B_l,
// total_dim] output, a row-wise table's partial sums added in rank order
// (ShardLayout::UnpackPooled); before the gradients' all-to-all, the
// rank's gradient rows into the owners' blocks (ShardLayout::PackGrads).
// On the CPU an op runs ShardLayout's function; on a GPU a kernel does the
// same per element from ShardLayout::Columns(), uploaded once, and gives
// the same bits (tests/train/dist/pooled_exchange_test.cc).
//
// Thread safety: one thread pushes (the rank's).

#include <span>

#include "engine/engine.h"
#include "storage/tensor.h"
#include "tools/train/dist/shard_layout.h"

namespace ember::train {

struct DeviceColumnPlan;  // pooled_exchange_kernels.h

class PooledExchange {
 public:
  // REQUIRES: `engine` and `layout` outlive this object and its ops. On a
  // GPU, uploads the column plan (an op; returns at once).
  PooledExchange(engine::Engine& engine, const ShardLayout& layout, engine::Context ctx);

  // Pushes received ([sum_p B_l * D_own(p)] f32, owner by owner) into out
  // ([B_l, total_dim] f32). Reads received; writes out.
  void Unpack(const storage::Tensor& received, storage::Tensor& out);
  // Pushes grads ([B_l, total_dim] f32) into send (owner by owner). Reads
  // grads; writes send.
  void PackGrads(const storage::Tensor& grads, storage::Tensor& send);

 private:
  // The kernel of a move, and the layout's CPU twin of it.
  using GpuMove = void (*)(const DeviceColumnPlan&, const float*, float*, void*);
  using CpuMove = void (ShardLayout::*)(std::span<const float>, std::span<float>) const;
  // Pushes one move of `from` into `to`: the kernel on a GPU (reading the
  // column plan too), the layout's function on the CPU.
  void PushMove(const char* name, const storage::Tensor& from, storage::Tensor& to, GpuMove gpu,
                CpuMove cpu);

  engine::Engine& engine_;
  const ShardLayout& layout_;
  const engine::Context ctx_;
  storage::Tensor plan_;  // on a GPU: Columns()'s arrays, one after another (i32)
};

}  // namespace ember::train
