#include "tools/train/dist/shard_layout.h"

#include <algorithm>

#include <fmt/format.h>

#include "engine/error.h"

namespace ember::train {

ShardLayout::ShardLayout(const ShardPlan& plan, const ops::TbeTables& tables, int64_t local_batch)
    : tables_(tables),
      local_batch_(local_batch),
      shards_(plan.num_gpus),
      owned_dim_(plan.num_gpus, 0) {
  if (static_cast<int>(plan.tables.size()) != tables.num_tables()) {
    throw InvalidArgument(fmt::format("[ShardLayout] the plan places {} tables; the TBE has {}",
                                      plan.tables.size(), tables.num_tables()));
  }
  if (local_batch < 1) {
    throw InvalidArgument(fmt::format("[ShardLayout] local batch {} < 1", local_batch));
  }
  for (int t = 0; t < tables.num_tables(); ++t) {
    const TableShard& shard = plan.tables[t];
    if (shard.kind == ShardKind::kTableWise && (shard.gpu < 0 || shard.gpu >= plan.num_gpus)) {
      throw InvalidArgument(
          fmt::format("[ShardLayout] table {} is placed on rank {}, not in [0, {})", t, shard.gpu,
                      plan.num_gpus));
    }
    if (shard.kind == ShardKind::kRowWise && tables.rows(t) < plan.num_gpus) {
      throw InvalidArgument(
          fmt::format("[ShardLayout] row-wise table {} has {} rows, fewer than the {} ranks", t,
                      tables.rows(t), plan.num_gpus));
    }
    int64_t begin = 0;
    const std::vector<int64_t> rows = shard.RowsPerGpu(tables.rows(t), plan.num_gpus);
    for (int p = 0; p < plan.num_gpus; ++p) {
      if (rows[p] == 0) continue;
      shards_[p].push_back({t, begin, begin + rows[p]});
      owned_dim_[p] += tables.dim(t);
      begin += rows[p];
    }
  }
  for (int r = 0; r < plan.num_gpus; ++r) {
    if (shards_[r].empty()) {
      throw InvalidArgument(
          fmt::format("[ShardLayout] rank {} owns no shard (plan {}): each rank must own one", r,
                      FormatShardPlan(plan)));
    }
  }
}

ops::TbeTables ShardLayout::OwnedTables(int r) const {
  std::vector<int64_t> rows, dims;
  for (const Shard& s : shards_[r]) {
    rows.push_back(s.row_end - s.row_begin);
    dims.push_back(tables_.dim(s.table));
  }
  return {std::move(rows), std::move(dims)};
}

std::vector<int64_t> ShardLayout::LengthsSent() const {
  std::vector<int64_t> counts;
  for (const std::vector<Shard>& shards : shards_) {
    counts.push_back(static_cast<int64_t>(shards.size()) * local_batch_);
  }
  return counts;
}

std::vector<int64_t> ShardLayout::LengthsReceived(int r) const {
  return std::vector<int64_t>(ranks(), static_cast<int64_t>(shards_[r].size()) * local_batch_);
}

std::vector<int64_t> ShardLayout::PooledSent(int r) const {
  return std::vector<int64_t>(ranks(), local_batch_ * owned_dim_[r]);
}

std::vector<int64_t> ShardLayout::PooledReceived() const {
  std::vector<int64_t> counts;
  for (int64_t dim : owned_dim_) counts.push_back(local_batch_ * dim);
  return counts;
}

void ShardLayout::CheckLocalBatch(std::span<const int64_t> offsets,
                                  std::span<const int64_t> indices) const {
  static constexpr char kWhere[] = "[ShardedTbe::DistributeInput]";
  const auto n = static_cast<int64_t>(indices.size());
  for (int t = 0; t < num_tables(); ++t) {
    const int64_t g0 = t * local_batch_;
    for (int64_t b = 0; b < local_batch_; ++b) {
      const int64_t start = offsets[g0 + b];
      const int64_t end = offsets[g0 + b + 1];
      if (start < 0 || start > end || end > n) {
        throw InvalidArgument(
            fmt::format("{} table {}, bag {}: offsets [{}, {}) outside the {} "
                        "indices, or decreasing",
                        kWhere, t, b, start, end, n));
      }
    }
    // The table's bags are one run of indices: one tight pass over it, and
    // only on a bad index a search for its bag.
    const int64_t rows = tables_.rows(t);
    const int64_t* first = indices.data() + offsets[g0];
    const int64_t* last = indices.data() + offsets[g0 + local_batch_];
    const int64_t* bad = std::find_if(first, last, [rows](int64_t index) {
      return static_cast<uint64_t>(index) >= static_cast<uint64_t>(rows);
    });
    if (bad == last) continue;
    const int64_t at = bad - indices.data();
    int64_t b = 0;
    while (offsets[g0 + b + 1] <= at) ++b;
    throw InvalidArgument(fmt::format("{} table {}, bag {}: index {} is out of range [0, {})",
                                      kWhere, t, b, *bad, rows));
  }
}

void ShardLayout::PackInput(std::span<const int64_t> offsets, std::span<const int64_t> indices,
                            std::span<int64_t> lengths, std::span<int64_t> send_indices,
                            std::span<int64_t> index_counts) const {
  CheckLocalBatch(offsets, indices);
  size_t length = 0;
  size_t sent = 0;
  for (int p = 0; p < ranks(); ++p) {
    const size_t first = sent;
    for (const Shard& s : shards_[p]) {
      const int64_t g0 = s.table * local_batch_;
      if (s.row_begin == 0 && s.row_end == tables_.rows(s.table)) {
        // A whole table: its bags as they are, its indices in one piece.
        for (int64_t b = 0; b < local_batch_; ++b) {
          lengths[length++] = offsets[g0 + b + 1] - offsets[g0 + b];
        }
        sent =
            std::copy(indices.begin() + offsets[g0], indices.begin() + offsets[g0 + local_batch_],
                      send_indices.begin() + static_cast<std::ptrdiff_t>(sent)) -
            send_indices.begin();
        continue;
      }
      for (int64_t b = 0; b < local_batch_; ++b) {
        const size_t bag_first = sent;
        for (int64_t i = offsets[g0 + b]; i < offsets[g0 + b + 1]; ++i) {
          if (indices[i] >= s.row_begin && indices[i] < s.row_end) {
            send_indices[sent++] = indices[i] - s.row_begin;
          }
        }
        lengths[length++] = static_cast<int64_t>(sent - bag_first);
      }
    }
    index_counts[p] = static_cast<int64_t>(sent - first);
  }
}

std::vector<int64_t> ShardLayout::IndexCounts(int r, std::span<const int64_t> lengths) const {
  const auto per_rank = static_cast<size_t>(shards_[r].size() * local_batch_);
  std::vector<int64_t> counts(ranks(), 0);
  for (int p = 0; p < ranks(); ++p) {
    for (int64_t n : lengths.subspan(p * per_rank, per_rank)) counts[p] += n;
  }
  return counts;
}

void ShardLayout::UnpackInput(int r, std::span<const int64_t> lengths,
                              std::span<const int64_t> indices, std::span<int64_t> offsets,
                              std::span<int64_t> owner_indices) const {
  const auto shards = static_cast<int64_t>(shards_[r].size());
  const int64_t per_rank = shards * local_batch_;
  // Where each source rank's indices start in `indices`.
  std::vector<int64_t> cursor(ranks(), 0);
  for (int p = 1; p < ranks(); ++p) {
    cursor[p] = cursor[p - 1];
    for (int64_t k = 0; k < per_rank; ++k) cursor[p] += lengths[(p - 1) * per_rank + k];
  }
  // Shard j's bags, source by source: a source's bags of shard j follow
  // its bags of the shards before j, their indices in one piece.
  int64_t out = 0;
  int64_t bag = 0;
  offsets[0] = 0;
  for (int64_t j = 0; j < shards; ++j) {
    for (int p = 0; p < ranks(); ++p) {
      const int64_t first = out;
      for (int64_t b = 0; b < local_batch_; ++b) {
        out += lengths[p * per_rank + j * local_batch_ + b];
        offsets[++bag] = out;
      }
      std::copy_n(indices.begin() + cursor[p], out - first, owner_indices.begin() + first);
      cursor[p] += out - first;
    }
  }
}

void ShardLayout::UnpackPooled(std::span<const float> received, std::span<float> out) const {
  const int64_t total_dim = tables_.total_dim();
  const float* block = received.data();  // owner p's [B_l, D_own(p)]
  for (int p = 0; p < ranks(); ++p) {
    for (int64_t b = 0; b < local_batch_; ++b) {
      const float* from = block + b * owned_dim_[p];
      for (const Shard& s : shards_[p]) {
        float* to = out.data() + b * total_dim + tables_.output_offset(s.table);
        // A table's first shard (rank order) is copied, so that a
        // table-wise table's sums pass exactly (a zero's sign included);
        // a row-wise table's other shards add theirs.
        if (s.row_begin == 0) {
          std::copy_n(from, tables_.dim(s.table), to);
        } else {
          for (int64_t c = 0; c < tables_.dim(s.table); ++c) to[c] += from[c];
        }
        from += tables_.dim(s.table);
      }
    }
    block += local_batch_ * owned_dim_[p];
  }
}

void ShardLayout::PackGrads(std::span<const float> grads, std::span<float> send) const {
  const int64_t total_dim = tables_.total_dim();
  float* to = send.data();
  for (int p = 0; p < ranks(); ++p) {
    for (int64_t b = 0; b < local_batch_; ++b) {
      for (const Shard& s : shards_[p]) {
        to = std::copy_n(grads.data() + b * total_dim + tables_.output_offset(s.table),
                         tables_.dim(s.table), to);
      }
    }
  }
}

ShardLayout::ColumnPlan ShardLayout::Columns() const {
  ColumnPlan plan;
  plan.first_column.push_back(0);
  std::vector<std::vector<int32_t>> sources(tables_.total_dim());
  for (int p = 0; p < ranks(); ++p) {
    for (const Shard& s : shards_[p]) {
      for (int64_t d = 0; d < tables_.dim(s.table); ++d) {
        const auto out = static_cast<int32_t>(tables_.output_offset(s.table) + d);
        sources[out].push_back(static_cast<int32_t>(plan.owner.size()));
        plan.owner.push_back(p);
        plan.out_column.push_back(out);
      }
    }
    plan.first_column.push_back(static_cast<int32_t>(plan.owner.size()));
  }
  plan.sources_begin.push_back(0);
  for (const std::vector<int32_t>& columns : sources) {
    plan.sources.insert(plan.sources.end(), columns.begin(), columns.end());
    plan.sources_begin.push_back(static_cast<int32_t>(plan.sources.size()));
  }
  return plan;
}

}  // namespace ember::train
