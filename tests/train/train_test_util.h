#pragma once

// What the runtime's tests share: small models and data, engines by name,
// a trained model's weights read back, and sources that misbehave on
// purpose.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "tools/train/data/synthetic_source.h"
#include "tools/train/trainer.h"

namespace ember::train::testing {

// The CPU engine types the runtime's tests run on.
std::vector<std::string> RuntimeEngineNames();
std::unique_ptr<engine::Engine> NewEngine(const std::string& name);

// A small model: 4 dense features, 3 tables of 50-200 rows of dim 4,
// bottom [8], top [8], `optimizer`.
ModelConfig TinyModel(Optimizer optimizer = Optimizer::kSgd);

// Synthetic data for `model`: `examples` examples (kEndless: no end) in
// batches of `batch`, from `seed`'s stream.
SyntheticOptions TinyData(const ModelConfig& model, int64_t batch, int64_t examples,
                          uint64_t seed = 7);

// Options for `model` on `ctx`: a cache of about a fifth of the rows,
// deterministic, the given schedule and steps (0: until the data ends).
TrainOptions TinyOptions(const ModelConfig& model, Schedule schedule, int64_t steps,
                         engine::Context ctx = engine::Context::CPU());

// Every dense state and every table row (flushed home), by section name,
// copied to the host from wherever they live.
std::map<std::string, std::vector<float>> ReadWeights(DlrmModel& model);

// A source that hands out `inner`'s batches, with index 0 of the batch
// ending at example position `bad_position` replaced by `bad_index`.
class CorruptingSource final : public BatchSource {
 public:
  CorruptingSource(std::unique_ptr<BatchSource> inner, int64_t bad_position, int64_t bad_index);
  [[nodiscard]] const DataSpec& spec() const override { return inner_->spec(); }
  [[nodiscard]] int64_t position() const override { return inner_->position(); }
  [[nodiscard]] std::optional<int64_t> size() const override { return inner_->size(); }
  [[nodiscard]] std::optional<HostBatch> Next(const BatchMemory& memory) override;
  void Seek(int64_t example) override { inner_->Seek(example); }

 private:
  std::unique_ptr<BatchSource> inner_;
  const int64_t bad_position_;
  const int64_t bad_index_;
};

}  // namespace ember::train::testing
