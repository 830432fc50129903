#pragma once

// SyntheticSource: the embedded default data, a deterministic synthetic
// click log shaped like Criteo's: dense features, per-table Zipf-distributed
// indices with variable pooling, and labels drawn from a hidden model that
// a DLRM can learn (so that loss falls and AUC rises).
//
// Determinism. Example n of seed s is a pure function of (model_seed, s,
// n): its draws come from CounterRng(Key(s, n)). The source's example e is
// example begin + e, so any position resumes exactly (Seek is O(1)) and a
// held-out set is just another seed, or another range of the same seed.
// The bytes are the same run to run and machine to machine as long as the
// math library's log and exp give the same results (the draws go through
// them); integers and the row permutation are exact.
//
// The world (fixed by model_seed; a held-out set keeps it):
//  - Rows. Table t draws a rank k in [0, rows[t]) from Zipf(zipf_alpha)
//    (zipf.h); rank k is row RowOfRank(t, k) = (a_t * k + c_t) mod rows[t],
//    an affine permutation with a_t coprime to rows[t], so that the hot
//    rows are scattered over the table, as hashed ids are.
//  - Dense feature j is CriteoDense(c) = log(1 + c) with c = floor(m_j *
//    E), E ~ Exp(1), m_j = 2^(j mod 8): a count after DLRM's transform, as
//    Criteo's integers become.
//  - Pooling: a bag has L indices, 1 <= L <= pooling_max, with L - 1 ~
//    Binomial(pooling_max - 1, (pooling_mean - 1) / (pooling_max - 1)):
//    mean pooling_mean, never empty, never above pooling_max.
//  - The hidden model: a logistic model,
//      logit = bias + sum_j w_j (x_j - mean_j) / std_j
//                   + sum_t (1 / L_t) sum over bag t's indices of s_t(row),
//    where w_j is a normal draw, s_t(row) is a normal draw hashed from
//    (model_seed, t, row) for the hidden_rows hottest rows of table t and 0
//    for the others. On 16384 examples of a calibration stream, mean_j and
//    std_j are measured, the w_j and s_t scaled so that the spread
//    (standard deviation) of the dense part is dense_signal and that of the
//    sparse part is sparse_signal, and the bias fitted so that the mean
//    click probability is click_rate. The label is 1 with probability
//    sigmoid(logit).
//
// Thread safety: one thread at a time (as every BatchSource); the world is
// immutable after construction.

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "tools/train/data/batch_source.h"
#include "tools/train/data/counter_rng.h"
#include "tools/train/data/zipf.h"

namespace ember::train {

// SyntheticOptions::num_examples for a source without an end.
inline constexpr int64_t kEndless = -1;

struct SyntheticOptions {
  int64_t batch_size = 2048;
  // The examples: the source's example e is example begin + e of `seed`'s
  // stream; num_examples of them, or kEndless.
  uint64_t seed = 1;
  int64_t begin = 0;
  int64_t num_examples = kEndless;
  // The world they come from: hot rows and the hidden model.
  uint64_t model_seed = 0;
  int num_dense = 13;
  std::vector<int64_t> rows = std::vector<int64_t>(26, 100000);
  double zipf_alpha = 1.05;  // 0: uniform rows
  double pooling_mean = 2.0;
  int pooling_max = 4;
  double click_rate = 0.25;    // mean click probability, in (0, 1)
  int64_t hidden_rows = 64;    // rows per table that carry signal (the hottest)
  double dense_signal = 1.0;   // spread of the dense part of the logit
  double sparse_signal = 1.0;  // spread of the sparse part
};

class SyntheticSource final : public BatchSource {
 public:
  // Builds the world (O(T * hidden_rows + 16384 examples) work). Throws
  // InvalidArgument naming the option for a value out of range.
  explicit SyntheticSource(const SyntheticOptions& options);

  [[nodiscard]] const DataSpec& spec() const override { return spec_; }
  [[nodiscard]] int64_t position() const override { return position_; }
  // nullopt for an endless source.
  [[nodiscard]] std::optional<int64_t> size() const override;
  [[nodiscard]] std::optional<HostBatch> Next(const BatchMemory& memory) override;
  // Any example >= 0 of an endless source.
  void Seek(int64_t example) override;
  // A copy of the world (no recalibration), at position 0.
  [[nodiscard]] std::unique_ptr<BatchSource> Fork() const override;
  // The same, drawing only rank `rank`'s examples of each batch: the
  // bytes of SliceBatch on the whole batch, for 1/ranks of the work.
  [[nodiscard]] std::unique_ptr<BatchSource> Slice(int rank, int ranks) const override;

  [[nodiscard]] const SyntheticOptions& options() const { return options_; }
  // The row of rank k (0: the hottest) in table t.
  [[nodiscard]] int64_t RowOfRank(int t, int64_t k) const;
  // The fitted bias of the hidden model.
  [[nodiscard]] double bias() const { return bias_; }

 private:
  // Fork's and Slice's: the world of `other`, its position and scratch
  // fresh, reading rank `rank` of `ranks` of each of its batches.
  SyntheticSource(const SyntheticSource& other, int rank, int ranks);

  // The example of the stream that the source's example `e` is.
  [[nodiscard]] int64_t StreamExample(int64_t e) const;
  // The source's examples (the slice's), or kEndless.
  [[nodiscard]] int64_t Examples() const;

  // Draws one example from `rng`: its dense features into dense[0, D), each
  // table's bag appended to bags_[t] and its length to lengths_[t]; returns
  // the hidden logit without the bias.
  double Draw(CounterRng& rng, float* dense);
  void ClearBags();
  void Calibrate();

  const SyntheticOptions options_;
  const DataSpec spec_;
  // Per table; tables of one size share one (its tables are read on
  // every draw, and 26 copies of them would not stay in a core's L1).
  std::vector<std::shared_ptr<const ZipfSampler>> zipf_;
  std::vector<uint64_t> perm_a_, perm_c_;   // RowOfRank's a_t, c_t
  std::vector<std::vector<float>> hidden_;  // [t][rank < hidden_rows]: s_t
  std::vector<double> pooling_cdf_;         // P(L <= l + 1), l < pooling_max
  std::vector<double> dense_scale_;         // m_j
  std::vector<double> dense_mean_, dense_inv_std_, dense_weight_;
  double bias_ = 0.0;
  // The slice (Slice): rank slice_rank_ of slice_ranks_ of each batch of
  // options_.batch_size examples; 0 of 1 for the whole. Positions count
  // the slice's examples.
  int slice_rank_ = 0;
  int slice_ranks_ = 1;
  int64_t position_ = 0;

  // Scratch of Next, kept to reuse its memory.
  std::vector<std::vector<int64_t>> bags_;
  std::vector<std::vector<int32_t>> lengths_;
};

}  // namespace ember::train
