#pragma once

// BatchSource: where HostBatches come from. A source is a sequence of
// examples (numbered 0, 1, ... from its start) cut into batches of
// batch_size() examples; the last batch may be shorter (it is never
// dropped). Implementations: SyntheticSource (the embedded default),
// CriteoTextSource (Criteo's TSV) and CriteoBinarySource (the converted
// binary form); Loader runs one on a thread ahead of the training step.
//
// State model. A source stands at position(): the number of examples it
// has handed out since its start, where the next batch begins. Next()
// advances it by the batch's size; Seek() moves it anywhere in the data. A
// source's content at a position never changes, so Seek(p) followed by
// Next() gives the batches that reading straight from 0 gives from p on:
// HostBatch::position is what a checkpoint records to resume exactly.
//
// Thread safety: a source is used by one thread at a time (the loader's).

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "engine/engine.h"
#include "storage/memory.h"
#include "tools/train/data/batch.h"

namespace ember::train {

// DataSpec: the shape of the data a model consumes: dense features per
// example, and the embedding tables' sizes (rows[t] rows in table t), which
// every index of table t must lie below.
struct DataSpec {
  int num_dense = 13;
  std::vector<int64_t> rows = {};

  [[nodiscard]] int num_tables() const { return static_cast<int>(rows.size()); }
  friend bool operator==(const DataSpec&, const DataSpec&) = default;
};

// BatchMemory: where a source puts a batch's tensors. REQUIRES: `engine`
// outlives every batch made with it.
struct BatchMemory {
  engine::Engine* engine = nullptr;
  storage::MemoryKind kind = storage::MemoryKind::kCpu;  // a host kind: kCpu or kPinned
};

class BatchSource {
 public:
  explicit BatchSource(int64_t batch_size);
  virtual ~BatchSource() = default;
  BatchSource(const BatchSource&) = delete;
  BatchSource& operator=(const BatchSource&) = delete;

  // B: the examples of every batch but possibly the last.
  [[nodiscard]] int64_t batch_size() const { return batch_size_; }
  // The shape of what Next() makes.
  [[nodiscard]] virtual const DataSpec& spec() const = 0;
  // Examples handed out so far: where the next batch starts.
  [[nodiscard]] virtual int64_t position() const = 0;
  // How many examples the source has, or nullopt where that is not known
  // before the end is read (text files) or there is no end.
  [[nodiscard]] virtual std::optional<int64_t> size() const = 0;

  // The next min(B, what is left) examples as a batch on the CPU context in
  // memory of `memory.kind`, its tensors written and ready to read (no op
  // pending on them); nullopt at the end of the data (and on every later
  // call). batch.position is position() after the batch. Throws
  // InvalidArgument for bad data, naming where it is (a file, a line, a
  // field), and what Tensor::Empty throws. After a throw position() is
  // unchanged; a source whose data is bad throws the same error again at
  // every Next() until a Seek(). Blocks on I/O.
  [[nodiscard]] virtual std::optional<HostBatch> Next(const BatchMemory& memory) = 0;

  // Moves to `example` (0 <= example <= size), so that the next batch
  // starts there. Throws InvalidArgument for a position outside the data,
  // naming it and the size, and what reading throws (a text source reads
  // its files to get there); after a throw the position is unspecified
  // until a Seek succeeds.
  virtual void Seek(int64_t example) = 0;

  // A second reader of the same data for another thread (the loader's
  // threads): the same spec, batch size and content, standing at 0, sharing
  // no mutable state with this one. Null where the source cannot be read
  // from two places at once cheaply (the default; a text file's Seek reads
  // it from the start). Cheap: no I/O or calibration is repeated.
  [[nodiscard]] virtual std::unique_ptr<BatchSource> Fork() const { return nullptr; }

  // A reader of rank `rank`'s part of every batch, for data-parallel ranks
  // that each train on a slice: batch k of the slice is examples rank * B /
  // ranks onwards of batch k, B / ranks of them, with positions and sizes
  // counted in the slice's examples, standing at 0. It makes only those
  // examples. Null where the source cannot (the default: the caller then
  // makes each whole batch and slices it), where B is not a multiple of
  // `ranks`, and where the size is not a multiple of B.
  [[nodiscard]] virtual std::unique_ptr<BatchSource> Slice(int /*rank*/, int /*ranks*/) const {
    return nullptr;
  }

 private:
  const int64_t batch_size_;
};

}  // namespace ember::train
