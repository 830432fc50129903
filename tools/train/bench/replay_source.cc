#include "tools/train/bench/replay_source.h"

#include <cstring>
#include <utility>

#include "tools/train/data/batch_builder.h"

namespace ember::train {
namespace {

template <typename T>
std::vector<T> Values(const storage::Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.numel());
}

}  // namespace

ReplaySource::Stored ReplaySource::Store(const HostBatch& batch) {
  return {batch.batch_size, Values<float>(batch.dense), Values<float>(batch.labels),
          Values<int64_t>(batch.indices), Values<int64_t>(batch.offsets)};
}

ReplaySource::ReplaySource(DataSpec spec, int64_t batch_size,
                           std::shared_ptr<const std::vector<Stored>> batches)
    : BatchSource(batch_size), spec_(std::move(spec)), batches_(std::move(batches)) {}

std::optional<HostBatch> ReplaySource::Next(const BatchMemory& memory) {
  const Stored& s =
      (*batches_)[static_cast<std::size_t>(position_ / batch_size()) % batches_->size()];
  BatchBuilder b(memory, s.batch_size, spec_.num_dense, spec_.num_tables());
  std::memcpy(b.dense(), s.dense.data(), s.dense.size() * sizeof(float));
  std::memcpy(b.labels(), s.labels.data(), s.labels.size() * sizeof(float));
  std::memcpy(b.offsets(), s.offsets.data(), s.offsets.size() * sizeof(int64_t));
  int64_t* indices = b.AllocateIndices(static_cast<int64_t>(s.indices.size()));
  std::memcpy(indices, s.indices.data(), s.indices.size() * sizeof(int64_t));
  position_ += s.batch_size;
  return std::move(b).Finish(position_);
}

}  // namespace ember::train
