#include "tools/train/data/batch_builder.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <absl/strings/str_cat.h>

#include "engine/context.h"
#include "engine/error.h"
#include "storage/dtype.h"
#include "storage/memory.h"
#include "storage/tensor.h"

namespace ember::train {
namespace {

using storage::DType;
using storage::MemoryKind;
using storage::Tensor;

Tensor Make(const BatchMemory& memory, std::vector<int64_t> shape, DType dtype) {
  Tensor t =
      Tensor::Empty(*memory.engine, std::move(shape), dtype, engine::Context::CPU(), memory.kind);
  // The buffer may come back from a pool with its previous users' fences:
  // Empty then ordered the first use after them with an op that writes the
  // new var, which the host must wait for before it writes. WaitToRead
  // waits for exactly that: no read of a var this young can be pending, so
  // it is as good as WaitToWrite here, and it pushes no op. WaitToWrite
  // would push one per tensor and wait for a CPU worker to run it: the
  // loader would queue behind the training step's CPU ops four times a
  // batch.
  t.WaitToRead();
  return t;
}

}  // namespace

BatchBuilder::BatchBuilder(const BatchMemory& memory, int64_t batch_size, int num_dense,
                           int num_tables)
    : memory_(memory) {
  if (memory.engine == nullptr) throw InvalidArgument("[BatchBuilder] no engine given");
  if (memory.kind != MemoryKind::kCpu && memory.kind != MemoryKind::kPinned) {
    throw InvalidArgument(absl::StrCat("[BatchBuilder] memory kind ",
                                       std::string(storage::ToString(memory.kind)),
                                       " is not a host kind (cpu or pinned)"));
  }
  if (batch_size < 0 || num_dense < 0 || num_tables < 0) {
    throw InvalidArgument(absl::StrCat("[BatchBuilder] negative size: batch ", batch_size,
                                       ", dense ", num_dense, ", tables ", num_tables));
  }
  num_dense_ = num_dense;
  num_tables_ = num_tables;
  batch_.batch_size = batch_size;
  batch_.dense = Make(memory, {batch_size, num_dense}, DType::kF32);
  batch_.labels = Make(memory, {batch_size}, DType::kF32);
  batch_.offsets = Make(memory, {num_tables * batch_size + 1}, DType::kI64);
  dense_ = batch_.dense.data<float>();
  labels_ = batch_.labels.data<float>();
  offsets_ = batch_.offsets.data<int64_t>();
}

int64_t* BatchBuilder::AllocateIndices(int64_t n) {
  if (batch_.indices) throw UsageError("[BatchBuilder::AllocateIndices] called twice");
  batch_.indices = Make(memory_, {n}, DType::kI64);
  indices_ = batch_.indices.data<int64_t>();
  return indices_;
}

HostBatch BatchBuilder::Finish(int64_t position) && {
  if (!batch_.indices) throw UsageError("[BatchBuilder::Finish] indices were never allocated");
  batch_.position = position;
  return std::move(batch_);
}

}  // namespace ember::train
