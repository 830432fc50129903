#pragma once

// Tensor: a Buffer of elements (shape, dtype) on one context, paired with the
// engine var that orders every access to it.
//
// State model. The buffer is touched only by engine ops that name var() (as
// a read or a write), or by the owning thread between a wait and its next
// push: after WaitToRead() it may read a host tensor's data(), after
// WaitToWrite() also write it. Destroying (or assigning over) a tensor
// deletes its var through the engine: the buffer goes back to its manager
// only after every op pushed on the var has finished, GPU work included, and
// the caller never blocks for that.
//
// Placement. Host kinds (kCpu, kPinned) live on the CPU context, GPU kinds
// (kDevice, kUvm) on the context of their GPU. A copy between contexts runs
// on the engine's copy workers (see CopyTo).
//
// Thread safety: a Tensor is used by one thread at a time; const methods may
// run concurrently. Its data is reached from ops through var().
//
// Memory ordering: host writes to data() made before a push are seen by the
// pushed op. What an op writing var() wrote (on the host or its stream) is
// seen by the caller of WaitToRead() once it returns.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "engine/context.h"
#include "engine/engine.h"
#include "storage/buffer.h"
#include "storage/dtype.h"
#include "storage/memory.h"
#include "storage/storage_manager.h"

namespace ember::storage {

class Tensor {
 public:
  // A tensor without engine, var or memory: what a moved-from tensor becomes.
  Tensor() = default;
  // Deletes the var through the engine (see the state model); never blocks.
  ~Tensor() { Release(); }
  Tensor(Tensor&& other) noexcept;
  Tensor& operator=(Tensor&& other) noexcept;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  // A tensor of `shape` and `dtype` on `ctx`, its memory uninitialized, from
  // the process-wide manager of `kind` (GetStorage). `kind` defaults to
  // kDevice on a GPU context and kCpu on the CPU. When the buffer still
  // carries its previous owners' fences, one op writing the new var orders
  // the first use after them (on a GPU stream where there is one), so the
  // caller never blocks. REQUIRES: `engine` outlives the tensor.
  // Throws InvalidArgument for a negative dim, a byte size past size_t or a
  // kind that does not live on `ctx`; Unavailable for a GPU that is missing;
  // OutOfMemory.
  [[nodiscard]] static Tensor Empty(engine::Engine& engine, std::vector<int64_t> shape, DType dtype,
                                    engine::Context ctx, std::optional<MemoryKind> kind = {});
  // The same with memory from `manager`, whose kind and device must fit
  // `ctx`. REQUIRES: `manager` outlives the deletion of the tensor's var, so
  // keep it past the engine's WaitForAll() (or the engine's destruction).
  [[nodiscard]] static Tensor Empty(engine::Engine& engine, StorageManager& manager,
                                    std::vector<int64_t> shape, DType dtype, engine::Context ctx);

  // False for a default-constructed or moved-from tensor; the methods below
  // that use the engine throw UsageError on one.
  [[nodiscard]] explicit operator bool() const { return engine_ != nullptr; }

  [[nodiscard]] const std::vector<int64_t>& shape() const { return shape_; }
  [[nodiscard]] DType dtype() const { return dtype_; }
  [[nodiscard]] engine::Context ctx() const { return ctx_; }
  [[nodiscard]] MemoryKind kind() const { return kind_; }
  [[nodiscard]] int64_t numel() const { return numel_; }
  [[nodiscard]] std::size_t bytes() const { return bytes_; }
  // The memory: device memory for kDevice, host-addressable otherwise; null
  // when bytes() is 0. Borrowed: valid until the var's deletion has run, so
  // ops pushed on var() before the tensor dies may keep it.
  [[nodiscard]] void* data() const { return buffer_ ? buffer_->data() : nullptr; }
  // data() as T*. Throws InvalidArgument when T is not dtype()'s type.
  template <typename T>
  [[nodiscard]] T* data() const {
    CheckDType(kDTypeOf<T>);
    return static_cast<T*>(data());
  }
  [[nodiscard]] engine::VarHandle var() const { return var_; }
  // REQUIRES: the tensor is not empty (operator bool).
  [[nodiscard]] engine::Engine& engine() const { return *engine_; }

  // Blocks until every write of the var pushed so far has finished, GPU work
  // included, and rethrows (once) the error it carries. Throws UsageError
  // from inside an op.
  void WaitToRead() const;
  // Blocks until every read and write pushed so far has finished: pushes an
  // op that writes the var and does nothing, then waits for it (as MXNet's
  // NDArray::WaitToWrite does). Throws like WaitToRead.
  void WaitToWrite() const;

  // Pushes a copy of this tensor's elements into `dst`; returns at once.
  // The op reads var() and writes dst.var(), and runs on: the CPU (memcpy)
  // between host tensors; dst's GPU copy-in workers from the host; the
  // source GPU's copy-out workers to the host or to another GPU (a peer
  // copy); the GPU's normal workers within one GPU. GPU copies are
  // cudaMemcpy*Async on the op's stream; their CUDA errors travel as the
  // op's error (CudaError, naming the call and the op). Throws
  // InvalidArgument when numel or dtype differ (naming both shapes), when
  // dst is this tensor, or when the engines differ.
  void CopyTo(Tensor& dst) const;

 private:
  void CheckDType(DType requested) const;
  void CheckUsable(std::string_view where) const;
  // Where fences of this buffer are recorded and waited on: the tensor's GPU,
  // the engine's host_memory_gpu for pinned memory when there is a GPU,
  // else the CPU.
  [[nodiscard]] engine::Context FenceContext() const;
  void PushFirstUse();
  // Deletes the var, handing the buffer to the deletion op; leaves the
  // tensor empty.
  void Release() noexcept;

  engine::Engine* engine_ = nullptr;
  engine::VarHandle var_;
  // Shared with the ops that order its first use and free it; its address
  // stays put when the tensor moves.
  std::shared_ptr<Buffer> buffer_;
  std::vector<int64_t> shape_;
  DType dtype_ = DType::kF32;
  engine::Context ctx_;
  MemoryKind kind_ = MemoryKind::kCpu;
  int64_t numel_ = 0;
  std::size_t bytes_ = 0;
};

}  // namespace ember::storage
