#pragma once

// BatchBuilder: allocates the tensors of one HostBatch and hands their
// memory to the code that fills it (a source), then hands the batch over.
//
//   BatchBuilder b(memory, B, spec.num_dense, spec.num_tables());
//   fill b.dense(), b.labels(), b.offsets() (T * B + 1 entries)
//   int64_t* idx = b.AllocateIndices(b.offsets()[T * B]);  fill idx
//   HostBatch batch = std::move(b).Finish(position);
//
// The tensors come from Tensor::Empty on the CPU context with
// memory.kind, and are waited for before their memory is handed out: a
// recycled buffer may still carry its previous owners' fences, which the
// op Empty pushed on the new var waits for. (A fresh var has no reads, so
// WaitToRead, which pushes nothing, does what WaitToWrite would.)
//
// Thread safety: one thread at a time.

#include <cstdint>

#include "tools/train/data/batch.h"
#include "tools/train/data/batch_source.h"

namespace ember::train {

class BatchBuilder {
 public:
  // Allocates dense [B, num_dense] f32, labels [B] f32 and offsets
  // [T * B + 1] i64, and waits until they may be written. Blocks for that
  // wait. Throws InvalidArgument for a null engine, a kind that is not a
  // host kind, or B < 0, and what Tensor::Empty throws.
  BatchBuilder(const BatchMemory& memory, int64_t batch_size, int num_dense, int num_tables);
  BatchBuilder(const BatchBuilder&) = delete;
  BatchBuilder& operator=(const BatchBuilder&) = delete;

  [[nodiscard]] int64_t batch_size() const { return batch_.batch_size; }
  [[nodiscard]] int num_dense() const { return num_dense_; }
  [[nodiscard]] int num_tables() const { return num_tables_; }
  // Row-major [B, num_dense].
  [[nodiscard]] float* dense() const { return dense_; }
  [[nodiscard]] float* labels() const { return labels_; }
  // T * B + 1 entries, table-major (batch.h).
  [[nodiscard]] int64_t* offsets() const { return offsets_; }

  // Allocates indices [n] i64, waits until it may be written and returns
  // its memory. Call once, before Finish. Throws like the constructor.
  [[nodiscard]] int64_t* AllocateIndices(int64_t n);
  // AllocateIndices' memory; null before.
  [[nodiscard]] int64_t* indices() const { return indices_; }

  // The batch, with `position` (examples consumed after it). REQUIRES:
  // AllocateIndices was called; every element has been written.
  [[nodiscard]] HostBatch Finish(int64_t position) &&;

 private:
  BatchMemory memory_;
  int num_dense_ = 0;
  int num_tables_ = 0;
  HostBatch batch_;
  float* dense_ = nullptr;
  float* labels_ = nullptr;
  int64_t* offsets_ = nullptr;
  int64_t* indices_ = nullptr;
};

}  // namespace ember::train
