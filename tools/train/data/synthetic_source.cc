#include "tools/train/data/synthetic_source.h"

#include <math.h>  // lgamma_r
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <numbers>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <absl/strings/str_cat.h>

#include "engine/error.h"
#include "tools/train/data/batch_builder.h"
#include "tools/train/data/criteo_line.h"

namespace ember::train {
namespace {

// Tags that keep the world's streams apart from each other and from the
// examples' (which are keyed by (seed, n) alone).
constexpr uint64_t kTagPermutation = 0x7065726d;  // "perm"
constexpr uint64_t kTagHidden = 0x68696464;       // "hidd"
constexpr uint64_t kTagWeight = 0x77656967;       // "weig"
constexpr uint64_t kTagCalibration = 0x63616c69;  // "cali"
constexpr int kCalibrationExamples = 16384;

[[noreturn]] void Bad(const std::string& what) {
  throw InvalidArgument(absl::StrCat("[SyntheticSource] ", what));
}

// A standard normal variate (Box-Muller) from the stream of `key`.
double Gaussian(uint64_t key) {
  CounterRng rng(key);
  const double r = std::sqrt(-2.0 * std::log(rng.NextOpenDouble()));
  return r * std::cos(2.0 * std::numbers::pi * rng.NextDouble());
}

DataSpec Validate(const SyntheticOptions& o) {
  if (o.begin < 0) Bad(absl::StrCat("begin = ", o.begin, " is negative"));
  if (o.num_examples < 0 && o.num_examples != kEndless) {
    Bad(absl::StrCat("num_examples = ", o.num_examples, " is negative (kEndless is -1)"));
  }
  if (o.num_examples > std::numeric_limits<int64_t>::max() - o.begin) {
    Bad(absl::StrCat("begin + num_examples = ", o.begin, " + ", o.num_examples,
                     " overflows int64"));
  }
  if (o.num_dense < 0) Bad(absl::StrCat("num_dense = ", o.num_dense, " is negative"));
  if (o.rows.empty()) Bad("rows is empty: give at least one table");
  for (size_t t = 0; t < o.rows.size(); ++t) {
    if (o.rows[t] < 1) Bad(absl::StrCat("rows[", t, "] = ", o.rows[t], " is not positive"));
  }
  if (!(o.zipf_alpha >= 0.0) || !std::isfinite(o.zipf_alpha)) {
    Bad(absl::StrCat("zipf_alpha = ", o.zipf_alpha, " is not a finite number >= 0"));
  }
  if (o.pooling_max < 1 || o.pooling_max > (1 << 16)) {
    Bad(absl::StrCat("pooling_max = ", o.pooling_max, " is not in [1, 65536]"));
  }
  if (!(o.pooling_mean >= 1.0 && o.pooling_mean <= o.pooling_max)) {
    Bad(absl::StrCat("pooling_mean = ", o.pooling_mean,
                     " is not in [1, pooling_max = ", o.pooling_max, "]"));
  }
  if (!(o.click_rate > 0.0 && o.click_rate < 1.0)) {
    Bad(absl::StrCat("click_rate = ", o.click_rate, " is not in (0, 1)"));
  }
  if (o.hidden_rows < 0) Bad(absl::StrCat("hidden_rows = ", o.hidden_rows, " is negative"));
  if (!(o.dense_signal >= 0.0) || !std::isfinite(o.dense_signal)) {
    Bad(absl::StrCat("dense_signal = ", o.dense_signal, " is not a finite number >= 0"));
  }
  if (!(o.sparse_signal >= 0.0) || !std::isfinite(o.sparse_signal)) {
    Bad(absl::StrCat("sparse_signal = ", o.sparse_signal, " is not a finite number >= 0"));
  }
  return DataSpec{.num_dense = o.num_dense, .rows = o.rows};
}

// log |Gamma(x)|. Not std::lgamma: it writes the global signgam, a data
// race when sources are made on several threads (ranks, loader threads);
// lgamma_r (POSIX) returns the same value and keeps the sign local.
double LogGamma(double x) {
  int sign = 0;
  return ::lgamma_r(x, &sign);
}

// The binomial(n, p) distribution's CDF shifted by one: cdf[l] = P(L <= l + 1).
std::vector<double> PoolingCdf(int pooling_max, double pooling_mean) {
  const int n = pooling_max - 1;
  std::vector<double> cdf(pooling_max, 1.0);
  if (n == 0) return cdf;
  const double p = (pooling_mean - 1.0) / n;
  double sum = 0.0;
  for (int k = 0; k < n; ++k) {
    // log C(n, k) + k log p + (n - k) log(1 - p), exact at p = 0 or 1.
    double pk;
    if (p == 0.0) {
      pk = k == 0 ? 1.0 : 0.0;
    } else if (p == 1.0) {
      pk = 0.0;
    } else {
      pk = std::exp(LogGamma(n + 1.0) - LogGamma(k + 1.0) - LogGamma(n - k + 1.0) +
                    k * std::log(p) + (n - k) * std::log1p(-p));
    }
    sum += pk;
    cdf[k] = std::min(sum, 1.0);
  }
  cdf[n] = 1.0;
  return cdf;
}

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

}  // namespace

SyntheticSource::SyntheticSource(const SyntheticOptions& options)
    : BatchSource(options.batch_size), options_(options), spec_(Validate(options)) {
  const int num_tables = spec_.num_tables();
  const uint64_t world = options_.model_seed;
  zipf_.reserve(num_tables);
  absl::flat_hash_map<int64_t, std::shared_ptr<const ZipfSampler>> samplers;  // by rows
  for (int t = 0; t < num_tables; ++t) {
    const int64_t rows = options_.rows[t];
    std::shared_ptr<const ZipfSampler>& sampler = samplers[rows];
    if (sampler == nullptr) {
      sampler = std::make_shared<const ZipfSampler>(rows, options_.zipf_alpha);
    }
    zipf_.push_back(sampler);
    // a_t: a multiplier coprime to rows (any start reaches one: 1 is).
    CounterRng rng(Key({world, kTagPermutation, static_cast<uint64_t>(t)}));
    const auto urows = static_cast<uint64_t>(rows);
    uint64_t a = rows == 1 ? 0 : 1 + rng.NextU64() % (urows - 1);
    while (rows > 1 && std::gcd(a, urows) != 1) a = a + 1 == urows ? 1 : a + 1;
    perm_a_.push_back(a);
    perm_c_.push_back(rng.NextU64() % urows);
  }
  // Unit scalars for now: Calibrate scales them to sparse_signal.
  hidden_.resize(num_tables);
  for (int t = 0; t < num_tables; ++t) {
    const int64_t hot = std::min(options_.hidden_rows, options_.rows[t]);
    hidden_[t].resize(hot);
    for (int64_t k = 0; k < hot; ++k) {
      const auto row = static_cast<uint64_t>(RowOfRank(t, k));
      hidden_[t][k] =
          static_cast<float>(Gaussian(Key({world, kTagHidden, static_cast<uint64_t>(t), row})));
    }
  }
  pooling_cdf_ = PoolingCdf(options_.pooling_max, options_.pooling_mean);
  for (int j = 0; j < spec_.num_dense; ++j) dense_scale_.push_back(std::ldexp(1.0, j % 8));
  bags_.resize(num_tables);
  lengths_.resize(num_tables);
  Calibrate();
}

SyntheticSource::SyntheticSource(const SyntheticSource& other, int rank, int ranks)
    : BatchSource(other.options_.batch_size / ranks),
      options_(other.options_),
      spec_(other.spec_),
      zipf_(other.zipf_),
      perm_a_(other.perm_a_),
      perm_c_(other.perm_c_),
      hidden_(other.hidden_),
      pooling_cdf_(other.pooling_cdf_),
      dense_scale_(other.dense_scale_),
      dense_mean_(other.dense_mean_),
      dense_inv_std_(other.dense_inv_std_),
      dense_weight_(other.dense_weight_),
      bias_(other.bias_),
      slice_rank_(rank),
      slice_ranks_(ranks),
      bags_(other.bags_.size()),
      lengths_(other.lengths_.size()) {}

std::unique_ptr<BatchSource> SyntheticSource::Fork() const {
  return std::unique_ptr<BatchSource>(new SyntheticSource(*this, slice_rank_, slice_ranks_));
}

std::unique_ptr<BatchSource> SyntheticSource::Slice(int rank, int ranks) const {
  if (ranks < 1 || rank < 0 || rank >= ranks) {
    throw InvalidArgument(absl::StrCat("[SyntheticSource::Slice] rank ", rank, " of ", ranks,
                                       ": expected 0 <= rank < ranks"));
  }
  const int64_t batch = options_.batch_size;
  const bool whole_batches =
      options_.num_examples == kEndless || options_.num_examples % batch == 0;
  if (slice_ranks_ != 1 || batch % ranks != 0 || !whole_batches) return nullptr;
  return std::unique_ptr<BatchSource>(new SyntheticSource(*this, rank, ranks));
}

// Example e of the slice is in batch e / B_l of the stream, at the slice's
// place in it.
int64_t SyntheticSource::StreamExample(int64_t e) const {
  if (slice_ranks_ == 1) return e;
  const int64_t local = batch_size();
  return (e / local) * options_.batch_size + slice_rank_ * local + e % local;
}

int64_t SyntheticSource::Examples() const {
  return options_.num_examples == kEndless ? kEndless : options_.num_examples / slice_ranks_;
}

int64_t SyntheticSource::RowOfRank(int t, int64_t k) const {
  const auto rows = static_cast<uint64_t>(options_.rows[t]);
  const auto uk = static_cast<uint64_t>(k);
  // a, c, k < rows: below 2^32 rows, a * k + c fits 64 bits (and 64-bit
  // division is several times faster than 128-bit).
  if (rows <= (uint64_t{1} << 32))
    return static_cast<int64_t>((perm_a_[t] * uk + perm_c_[t]) % rows);
  return static_cast<int64_t>((static_cast<unsigned __int128>(perm_a_[t]) * uk + perm_c_[t]) %
                              rows);
}

void SyntheticSource::ClearBags() {
  for (auto& bag : bags_) bag.clear();
  for (auto& lengths : lengths_) lengths.clear();
}

double SyntheticSource::Draw(CounterRng& rng, float* dense) {
  double logit = 0.0;
  for (int j = 0; j < spec_.num_dense; ++j) {
    // Below 2^53 * 128: the count fits an int64_t.
    const auto count = static_cast<int64_t>(-dense_scale_[j] * std::log(rng.NextOpenDouble()));
    dense[j] = CriteoDense(count);
    if (!dense_weight_.empty()) {
      logit += dense_weight_[j] * (dense[j] - dense_mean_[j]) * dense_inv_std_[j];
    }
  }
  const auto uniform = [&rng] { return rng.NextDouble(); };
  const int num_tables = spec_.num_tables();
  for (int t = 0; t < num_tables; ++t) {
    int length = 1;
    if (options_.pooling_max > 1) {
      const double u = rng.NextDouble();
      length = 1 + static_cast<int>(std::upper_bound(pooling_cdf_.begin(), pooling_cdf_.end(), u) -
                                    pooling_cdf_.begin());
      length = std::min(length, options_.pooling_max);
    }
    const ZipfSampler& zipf = *zipf_[t];
    const std::vector<float>& hidden = hidden_[t];
    double signal = 0.0;
    for (int i = 0; i < length; ++i) {
      const int64_t k = zipf.Sample(uniform);
      if (k < static_cast<int64_t>(hidden.size())) signal += hidden[k];
      bags_[t].push_back(RowOfRank(t, k));
    }
    lengths_[t].push_back(length);
    logit += signal / length;
  }
  return logit;
}

void SyntheticSource::Calibrate() {
  const int num_dense = spec_.num_dense;
  const auto at = [num_dense](int i, int j) { return static_cast<size_t>(i) * num_dense + j; };
  std::vector<float> dense(at(kCalibrationExamples, 0));
  std::vector<double> sparse_logit(kCalibrationExamples);
  // The calibration examples, with unit hidden scalars and no dense weights
  // yet: Draw returns the sparse part alone.
  for (int i = 0; i < kCalibrationExamples; ++i) {
    CounterRng rng(Key({options_.model_seed, kTagCalibration, static_cast<uint64_t>(i)}));
    sparse_logit[i] = Draw(rng, &dense[at(i, 0)]);
    ClearBags();
  }
  const auto mean_and_sd = [](const std::vector<double>& x) {
    double sum = 0.0, sum2 = 0.0;
    for (double v : x) {
      sum += v;
      sum2 += v * v;
    }
    const double mean = sum / static_cast<double>(x.size());
    return std::pair(mean,
                     std::sqrt(std::max(sum2 / static_cast<double>(x.size()) - mean * mean, 0.0)));
  };
  // The sparse part's spread becomes sparse_signal.
  const double sparse_sd = mean_and_sd(sparse_logit).second;
  const double sparse_scale = sparse_sd > 0.0 ? options_.sparse_signal / sparse_sd : 0.0;
  for (auto& table : hidden_) {
    for (float& s : table) s = static_cast<float>(s * sparse_scale);
  }
  for (double& l : sparse_logit) l *= sparse_scale;
  // The dense features' moments, then random weights over the standardized
  // features, scaled so that the dense part's spread is dense_signal.
  dense_mean_.assign(num_dense, 0.0);
  dense_inv_std_.assign(num_dense, 0.0);
  std::vector<double> column(kCalibrationExamples);
  for (int j = 0; j < num_dense; ++j) {
    for (int i = 0; i < kCalibrationExamples; ++i) column[i] = dense[at(i, j)];
    const auto [mean, sd] = mean_and_sd(column);
    dense_mean_[j] = mean;
    dense_inv_std_[j] = sd > 0.0 ? 1.0 / sd : 0.0;
    dense_weight_.push_back(
        Gaussian(Key({options_.model_seed, kTagWeight, static_cast<uint64_t>(j)})));
  }
  std::vector<double> dense_logit(kCalibrationExamples, 0.0);
  for (int i = 0; i < kCalibrationExamples; ++i) {
    for (int j = 0; j < num_dense; ++j) {
      dense_logit[i] += dense_weight_[j] * (dense[at(i, j)] - dense_mean_[j]) * dense_inv_std_[j];
    }
  }
  const double dense_sd = num_dense > 0 ? mean_and_sd(dense_logit).second : 0.0;
  const double dense_scale = dense_sd > 0.0 ? options_.dense_signal / dense_sd : 0.0;
  for (double& w : dense_weight_) w *= dense_scale;
  // The bias, by bisection: the mean click probability grows with it.
  std::vector<double> logit(kCalibrationExamples);
  for (int i = 0; i < kCalibrationExamples; ++i) {
    logit[i] = dense_logit[i] * dense_scale + sparse_logit[i];
  }
  double lo = -40.0, hi = 40.0;
  for (int iter = 0; iter < 60; ++iter) {
    const double mid = 0.5 * (lo + hi);
    double mean = 0.0;
    for (double l : logit) mean += Sigmoid(mid + l);
    mean /= kCalibrationExamples;
    (mean < options_.click_rate ? lo : hi) = mid;
  }
  bias_ = 0.5 * (lo + hi);
}

std::optional<int64_t> SyntheticSource::size() const {
  const int64_t examples = Examples();
  if (examples == kEndless) return std::nullopt;
  return examples;
}

std::optional<HostBatch> SyntheticSource::Next(const BatchMemory& memory) {
  int64_t count = batch_size();
  if (const int64_t examples = Examples(); examples != kEndless) {
    count = std::min(count, examples - position_);
    if (count <= 0) return std::nullopt;
  } else {
    count = std::min(
        count, std::numeric_limits<int64_t>::max() - options_.begin - StreamExample(position_));
    if (count <= 0) return std::nullopt;
  }
  const int num_tables = spec_.num_tables();
  const int num_dense = spec_.num_dense;
  BatchBuilder builder(memory, count, num_dense, num_tables);
  ClearBags();
  float* dense = builder.dense();
  float* labels = builder.labels();
  for (int64_t b = 0; b < count; ++b) {
    const auto n = static_cast<uint64_t>(options_.begin + StreamExample(position_ + b));
    CounterRng rng(Key({options_.seed, n}));
    const double logit = bias_ + Draw(rng, dense + b * num_dense);
    // The label is the last draw of the example.
    labels[b] = rng.NextDouble() < Sigmoid(logit) ? 1.0f : 0.0f;
  }
  int64_t* offsets = builder.offsets();
  int64_t total = 0;
  for (int t = 0; t < num_tables; ++t) {
    for (int64_t b = 0; b < count; ++b) {
      offsets[t * count + b] = total;
      total += lengths_[t][b];
    }
  }
  offsets[num_tables * count] = total;
  int64_t* indices = builder.AllocateIndices(total);
  for (int t = 0; t < num_tables; ++t) {
    if (!bags_[t].empty()) {
      std::memcpy(indices, bags_[t].data(), bags_[t].size() * sizeof(int64_t));
    }
    indices += bags_[t].size();
  }
  position_ += count;
  return std::move(builder).Finish(position_);
}

void SyntheticSource::Seek(int64_t example) {
  const int64_t examples = Examples();
  if (example < 0 || (examples != kEndless && example > examples)) {
    throw InvalidArgument(absl::StrCat("[SyntheticSource::Seek] example ", example,
                                       " is outside [0, ", examples, "]"));
  }
  position_ = example;
}

}  // namespace ember::train
