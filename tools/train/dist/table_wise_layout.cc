#include "tools/train/dist/table_wise_layout.h"

#include <algorithm>

#include <fmt/format.h>

#include "engine/error.h"

namespace ember::train {

TableWiseLayout::TableWiseLayout(const ShardPlan& plan, const ops::TbeTables& tables,
                                 int64_t local_batch)
    : tables_(tables),
      local_batch_(local_batch),
      owned_(plan.num_gpus),
      owned_dim_(plan.num_gpus, 0) {
  if (static_cast<int>(plan.tables.size()) != tables.num_tables()) {
    throw InvalidArgument(fmt::format("[TableWiseLayout] the plan places {} tables; the TBE has {}",
                                      plan.tables.size(), tables.num_tables()));
  }
  if (local_batch < 1) {
    throw InvalidArgument(fmt::format("[TableWiseLayout] local batch {} < 1", local_batch));
  }
  for (int t = 0; t < tables.num_tables(); ++t) {
    const TableShard& shard = plan.tables[t];
    if (shard.kind != ShardKind::kTableWise || shard.gpu < 0 || shard.gpu >= plan.num_gpus) {
      throw InvalidArgument(fmt::format(
          "[TableWiseLayout] table {} is not table-wise on a rank in [0, {}): only table-wise "
          "shards are trained so far",
          t, plan.num_gpus));
    }
    owned_[shard.gpu].push_back(t);
    owned_dim_[shard.gpu] += tables.dim(t);
  }
  for (int r = 0; r < plan.num_gpus; ++r) {
    if (owned_[r].empty()) {
      throw InvalidArgument(
          fmt::format("[TableWiseLayout] rank {} owns no table (plan {}): each rank must own one",
                      r, FormatShardPlan(plan)));
    }
  }
}

ops::TbeTables TableWiseLayout::OwnedTables(int r) const {
  std::vector<int64_t> rows, dims;
  for (int t : owned_[r]) rows.push_back(tables_.rows(t)), dims.push_back(tables_.dim(t));
  return {std::move(rows), std::move(dims)};
}

std::vector<int64_t> TableWiseLayout::LengthsSent() const {
  std::vector<int64_t> counts;
  for (const std::vector<int>& tables : owned_) {
    counts.push_back(static_cast<int64_t>(tables.size()) * local_batch_);
  }
  return counts;
}

std::vector<int64_t> TableWiseLayout::LengthsReceived(int r) const {
  return std::vector<int64_t>(ranks(), static_cast<int64_t>(owned_[r].size()) * local_batch_);
}

std::vector<int64_t> TableWiseLayout::PooledSent(int r) const {
  return std::vector<int64_t>(ranks(), local_batch_ * owned_dim_[r]);
}

std::vector<int64_t> TableWiseLayout::PooledReceived() const {
  std::vector<int64_t> counts;
  for (int64_t dim : owned_dim_) counts.push_back(local_batch_ * dim);
  return counts;
}

void TableWiseLayout::PackInput(std::span<const int64_t> offsets, std::span<const int64_t> indices,
                                std::span<int64_t> lengths, std::span<int64_t> send_indices,
                                std::span<int64_t> index_counts) const {
  size_t length = 0;
  size_t index = 0;
  for (int p = 0; p < ranks(); ++p) {
    const size_t first = index;
    for (int t : owned_[p]) {
      for (int64_t b = 0; b < local_batch_; ++b) {
        const int64_t g = t * local_batch_ + b;
        lengths[length++] = offsets[g + 1] - offsets[g];
        for (int64_t i = offsets[g]; i < offsets[g + 1]; ++i) send_indices[index++] = indices[i];
      }
    }
    index_counts[p] = static_cast<int64_t>(index - first);
  }
}

std::vector<int64_t> TableWiseLayout::IndexCounts(int r, std::span<const int64_t> lengths) const {
  const auto per_rank = static_cast<size_t>(owned_[r].size() * local_batch_);
  std::vector<int64_t> counts(ranks(), 0);
  for (int p = 0; p < ranks(); ++p) {
    const auto from = lengths.subspan(p * per_rank, per_rank);
    for (int64_t n : from) counts[p] += n;
  }
  return counts;
}

void TableWiseLayout::UnpackInput(int r, std::span<const int64_t> lengths,
                                  std::span<const int64_t> indices, std::span<int64_t> offsets,
                                  std::span<int64_t> owner_indices) const {
  const auto tables = static_cast<int64_t>(owned_[r].size());
  const int64_t per_rank = tables * local_batch_;
  // Where each source rank's indices start in `indices`.
  std::vector<int64_t> source_start(ranks() + 1, 0);
  for (int p = 0; p < ranks(); ++p) {
    int64_t n = 0;
    for (int64_t k = 0; k < per_rank; ++k) n += lengths[p * per_rank + k];
    source_start[p + 1] = source_start[p] + n;
  }
  // Table j's bags, source by source: the source's bags of table j follow
  // its bags of the tables before j.
  std::vector<int64_t> cursor(source_start.begin(), source_start.end() - 1);
  int64_t out = 0;
  int64_t bag = 0;
  offsets[0] = 0;
  for (int64_t j = 0; j < tables; ++j) {
    for (int p = 0; p < ranks(); ++p) {
      for (int64_t b = 0; b < local_batch_; ++b) {
        const int64_t n = lengths[p * per_rank + j * local_batch_ + b];
        std::copy_n(indices.begin() + cursor[p], n, owner_indices.begin() + out);
        cursor[p] += n;
        out += n;
        offsets[++bag] = out;
      }
    }
  }
}

void TableWiseLayout::UnpackPooled(std::span<const float> received, std::span<float> out) const {
  const int64_t total_dim = tables_.total_dim();
  int64_t block = 0;  // where owner p's block starts in `received`
  for (int p = 0; p < ranks(); ++p) {
    for (int64_t b = 0; b < local_batch_; ++b) {
      const float* row = received.data() + block + b * owned_dim_[p];
      for (int t : owned_[p]) {
        std::copy_n(row, tables_.dim(t), out.data() + b * total_dim + tables_.output_offset(t));
        row += tables_.dim(t);
      }
    }
    block += local_batch_ * owned_dim_[p];
  }
}

void TableWiseLayout::PackGrads(std::span<const float> grads, std::span<float> send) const {
  const int64_t total_dim = tables_.total_dim();
  float* to = send.data();
  for (int p = 0; p < ranks(); ++p) {
    for (int64_t b = 0; b < local_batch_; ++b) {
      for (int t : owned_[p]) {
        to = std::copy_n(grads.data() + b * total_dim + tables_.output_offset(t), tables_.dim(t),
                         to);
      }
    }
  }
}

}  // namespace ember::train
