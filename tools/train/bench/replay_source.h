#pragma once

// ReplaySource: batches made once, handed out as copies in a cycle, for
// the benches: a step never waits for data, as it would behind a source
// that makes each batch (a synthetic Zipf batch of 8192 x 26 takes a core
// about 16 ms). Positions keep counting, so a trainer's bookkeeping is
// that of an endless source.
//
// Thread safety: a source per thread (BatchSource's); the stored batches
// are shared read-only.

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "tools/train/data/batch_source.h"

namespace ember::train {

class ReplaySource final : public BatchSource {
 public:
  struct Stored {
    int64_t batch_size = 0;
    std::vector<float> dense, labels;
    std::vector<int64_t> indices, offsets;
  };

  // The host batch's values (its tensors ready to read).
  static Stored Store(const HostBatch& batch);

  // REQUIRES: `batches` is not empty, each of `batch_size` examples of
  // `spec`'s shape.
  ReplaySource(DataSpec spec, int64_t batch_size,
               std::shared_ptr<const std::vector<Stored>> batches);

  [[nodiscard]] const DataSpec& spec() const override { return spec_; }
  [[nodiscard]] int64_t position() const override { return position_; }
  [[nodiscard]] std::optional<int64_t> size() const override { return std::nullopt; }
  void Seek(int64_t example) override { position_ = example; }
  std::optional<HostBatch> Next(const BatchMemory& memory) override;

 private:
  const DataSpec spec_;
  const std::shared_ptr<const std::vector<Stored>> batches_;
  int64_t position_ = 0;
};

}  // namespace ember::train
