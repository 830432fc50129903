#include "tests/train/train_test_util.h"

#include <cstring>

#include "tools/train/model_state.h"

namespace ember::train::testing {

std::vector<std::string> RuntimeEngineNames() {
  return {"NaiveEngine", "ThreadedEngine", "ThreadedEnginePerDevice"};
}

std::unique_ptr<engine::Engine> NewEngine(const std::string& name) {
  engine::EngineOptions options = engine::ParseEngineType(name);
  options.cpu_workers = 2;  // several ops at once: the schedules' overlap is real
  options.pool_workers = 2;
  return engine::CreateEngine(options);
}

ModelConfig TinyModel(Optimizer optimizer) {
  ModelConfig m;
  m.num_dense = 4;
  m.bottom_mlp = {8};
  m.table_rows = {50, 120, 200};
  m.embedding_dim = 4;
  m.top_mlp = {8};
  m.optimizer.kind = optimizer;
  if (optimizer == Optimizer::kAdam) {
    m.optimizer.dense_lr = 0.01f;
    m.optimizer.embedding_lr = 0.01f;
  }
  m.seed = 11;
  return m;
}

SyntheticOptions TinyData(const ModelConfig& model, int64_t batch, int64_t examples,
                          uint64_t seed) {
  SyntheticOptions d;
  d.batch_size = batch;
  d.seed = seed;
  d.num_examples = examples;
  d.model_seed = 5;
  d.num_dense = static_cast<int>(model.num_dense);
  d.rows = model.table_rows;
  d.pooling_mean = 2.0;
  d.pooling_max = 3;
  d.hidden_rows = 16;
  return d;
}

TrainOptions TinyOptions(const ModelConfig& model, Schedule schedule, int64_t steps,
                         engine::Context ctx) {
  TrainOptions o;
  o.model = model;
  o.placement.ctx = ctx;
  o.placement.cache.load_factor = 0.2;
  o.placement.deterministic = true;
  o.schedule = schedule;
  o.steps = steps;
  return o;
}

std::map<std::string, std::vector<float>> ReadWeights(DlrmModel& model) {
  return ReadModelState(model);
}

CorruptingSource::CorruptingSource(std::unique_ptr<BatchSource> inner, int64_t bad_position,
                                   int64_t bad_index)
    : BatchSource(inner->batch_size()),
      inner_(std::move(inner)),
      bad_position_(bad_position),
      bad_index_(bad_index) {}

std::optional<HostBatch> CorruptingSource::Next(const BatchMemory& memory) {
  std::optional<HostBatch> batch = inner_->Next(memory);
  if (batch && batch->position == bad_position_) batch->indices.data<int64_t>()[0] = bad_index_;
  return batch;
}

}  // namespace ember::train::testing
