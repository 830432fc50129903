#include "tools/train/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <utility>
#include <vector>

#include <absl/strings/str_join.h>
#include <fmt/format.h>

#include "engine/error.h"
#include "tools/train/checkpoint_file.h"

namespace ember::train {
namespace {

constexpr char kWeights[] = "tables.weights";
constexpr char kCacheRows[] = "cache.rows";

// A model tensor and, where its memory is not host-addressable (GPU device
// memory), a host copy to read or fill.
struct Named {
  std::string name;
  Tensor* tensor = nullptr;
  Tensor host;
};

std::vector<Named> ModelTensors(DlrmModel& model) {
  std::vector<Named> all;
  auto add = [&](const std::string& name, Tensor& tensor) { all.push_back({name, &tensor, {}}); };
  model.ForEachDenseState(add);
  add(kWeights, model.tbe().home());
  model.ForEachTableState(add);
  return all;
}

bool HostAddressable(const Tensor& tensor) { return tensor.kind() != storage::MemoryKind::kDevice; }

// The cache's rows, most recently used first, so that a smaller cache
// warmed from them keeps the hottest.
std::vector<int64_t> CachedRows(cache::CachedTbe& tbe) {
  const cache::CacheSnapshot snapshot = tbe.Snapshot();
  std::vector<std::size_t> slots;
  for (std::size_t s = 0; s < snapshot.tags.size(); ++s) {
    if (snapshot.tags[s] >= 0) slots.push_back(s);
  }
  std::stable_sort(slots.begin(), slots.end(), [&](std::size_t a, std::size_t b) {
    return snapshot.timestamps[a] > snapshot.timestamps[b];
  });
  std::vector<int64_t> rows;
  rows.reserve(slots.size());
  for (std::size_t s : slots) rows.push_back(snapshot.tags[s]);
  return rows;
}

}  // namespace

std::string CheckpointPath(const std::string& dir) {
  return (std::filesystem::path(dir) / kCheckpointFileName).string();
}

void SaveCheckpoint(DlrmModel& model, const std::string& dir, const CheckpointPoint& point) {
  model.tbe().Flush();
  const std::vector<int64_t> rows = CachedRows(model.tbe());
  std::vector<Named> tensors = ModelTensors(model);
  engine::Engine& engine = model.engine();
  for (Named& n : tensors) {
    if (HostAddressable(*n.tensor)) continue;
    n.host = Tensor::Empty(engine, n.tensor->shape(), n.tensor->dtype(), engine::Context::CPU());
    n.tensor->CopyTo(n.host);
  }
  std::vector<SectionOut> sections;
  for (Named& n : tensors) {
    const Tensor& readable = n.host ? n.host : *n.tensor;
    readable.WaitToRead();  // the flush, the copies, the last updates
    sections.push_back({n.name, readable.dtype(), readable.shape(), readable.data()});
  }
  sections.push_back(
      {kCacheRows, storage::DType::kI64, {static_cast<int64_t>(rows.size())}, rows.data()});
  WriteCheckpointFile(CheckpointPath(dir),
                      CheckpointHeader{model.config(), point.step, point.position}, sections);
}

CheckpointPoint LoadCheckpoint(DlrmModel& model, const std::string& dir) {
  const std::string path = CheckpointPath(dir);
  const CheckpointFile file = CheckpointFile::Open(path);
  const std::vector<std::string> diffs = model.config().ShapeDifferences(file.header().model);
  if (!diffs.empty()) {
    throw InvalidArgument(fmt::format("[LoadCheckpoint] {} holds another model: {}", path,
                                      absl::StrJoin(diffs, "; ")));
  }
  // Every section is found and checked before any tensor changes.
  std::vector<Named> tensors = ModelTensors(model);
  std::vector<const CheckpointFile::Section*> sections;
  for (const Named& n : tensors) {
    const CheckpointFile::Section* s = file.Find(n.name);
    if (s == nullptr) {
      throw InvalidArgument(fmt::format("[LoadCheckpoint] {} has no section '{}'", path, n.name));
    }
    if (s->dtype != n.tensor->dtype() || s->shape != n.tensor->shape() ||
        s->bytes != n.tensor->bytes()) {
      throw InvalidArgument(fmt::format(
          "[LoadCheckpoint] {}: section '{}' is {} [{}]; the model's is {} [{}]", path, n.name,
          storage::ToString(s->dtype), absl::StrJoin(s->shape, ", "),
          storage::ToString(n.tensor->dtype()), absl::StrJoin(n.tensor->shape(), ", ")));
    }
    sections.push_back(s);
  }
  const CheckpointFile::Section* rows_section = file.Find(kCacheRows);
  std::vector<int64_t> rows;
  if (rows_section != nullptr && rows_section->dtype == storage::DType::kI64) {
    rows.resize(rows_section->bytes / sizeof(int64_t));
    file.Read(*rows_section, rows.data());
  }

  engine::Engine& engine = model.engine();
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    Named& n = tensors[i];
    if (HostAddressable(*n.tensor)) {
      n.tensor->WaitToWrite();
      file.Read(*sections[i], n.tensor->data());
    } else {
      n.host = Tensor::Empty(engine, n.tensor->shape(), n.tensor->dtype(), engine::Context::CPU());
      n.host.WaitToWrite();
      file.Read(*sections[i], n.host.data());
      n.host.CopyTo(*n.tensor);
    }
  }
  // Rows out of range (a damaged list) would throw; a saved cache holds
  // only valid rows, so they are kept as they are.
  model.tbe().Warm(rows);
  return {file.header().step, file.header().position};
}

}  // namespace ember::train
