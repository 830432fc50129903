// The cases of ember-bench-ops (see ops_cases.h). Everything runs on device
// 0. Per shape: make the batch on the GPU, hand it to the PyTorch peer (a
// child process, while this process holds little device memory), then make
// the weights and run the gather and Ember's cases; at the end the shape's
// tensors go and the storage pool gives its cache back, so the next peer
// finds the device empty.

#include "tools/bench/ops/ops_cases.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/engine.h"
#include "engine/error.h"
#include "ops/embedding_bag.h"
#include "storage/storage.h"
#include "storage/tensor.h"
#include "tools/bench/ops/gather_kernel.h"
#include "tools/bench/ops/ops_cuda.h"
#include "tools/bench/ops/ops_peer.h"

namespace ember::bench {
namespace ops_bench {
namespace {

using Clock = std::chrono::steady_clock;
using storage::DType;
using storage::Tensor;

double MillisSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

int ItersFor(const OpsBenchOptions& o, double one_ms) {
  const double wanted = std::ceil(o.time_ms / std::max(one_ms, 1e-3));
  return static_cast<int>(std::clamp(wanted, double(o.min_iters), double(o.max_iters)));
}

// The scheme of ops_cases.h; `time(iters)` returns the ms of iters
// iterations, whatever clock it reads.
Timing Measure(const OpsBenchOptions& o, const std::function<double(int)>& time) {
  time(o.warmup);
  Timing timing;
  timing.iters = ItersFor(o, time(1));
  for (int run = 0; run < o.repeat; ++run) timing.runs.push_back(time(timing.iters) / timing.iters);
  timing.ms = Percentile(timing.runs, 0.5);
  return timing;
}

Timing MeasureEngine(const OpsBenchOptions& o, engine::Engine& engine,
                     const std::function<void()>& push) {
  return Measure(o, [&](int iters) {
    const auto start = Clock::now();
    for (int i = 0; i < iters; ++i) push();
    engine.WaitForAll();
    return MillisSince(start);
  });
}

// Two cases timed run by run, a then b, with the same iterations, so that
// their ratio can be taken run by run (Timing::runs pair up): a drift of
// the GPU's clocks between two blocks of runs then cancels instead of
// counting as the difference between the cases.
std::pair<Timing, Timing> MeasureEnginePaired(const OpsBenchOptions& o, engine::Engine& engine,
                                              const std::function<void()>& push_a,
                                              const std::function<void()>& push_b) {
  auto timer = [&](const std::function<void()>& push) {
    return [&](int iters) {
      const auto start = Clock::now();
      for (int i = 0; i < iters; ++i) push();
      engine.WaitForAll();
      return MillisSince(start);
    };
  };
  const auto time_a = timer(push_a);
  const auto time_b = timer(push_b);
  time_a(o.warmup);
  time_b(o.warmup);
  Timing a, b;
  a.iters = b.iters = ItersFor(o, time_a(1));
  for (int run = 0; run < o.repeat; ++run) {
    a.runs.push_back(time_a(a.iters) / a.iters);
    b.runs.push_back(time_b(b.iters) / b.iters);
  }
  a.ms = Percentile(a.runs, 0.5);
  b.ms = Percentile(b.runs, 0.5);
  return {std::move(a), std::move(b)};
}

// cdf[k] = P(rank <= k) of Zipf(alpha) over `rows` ranks (alpha 0: uniform).
std::vector<double> ZipfCdf(int64_t rows, double alpha) {
  std::vector<double> cdf(rows);
  double sum = 0;
  for (int64_t k = 0; k < rows; ++k) cdf[k] = sum += std::pow(double(k + 1), -alpha);
  for (double& value : cdf) value /= sum;
  cdf.back() = 1.0;
  return cdf;
}

std::string ShapeName(const OpsShape& s) {
  return absl::StrFormat("T=%d L=%d B=%d", s.tables, s.pooling, s.batch);
}

class ShapeRun {
 public:
  ShapeRun(const OpsBenchOptions& o, engine::Engine& engine, const Stream& stream,
           const double* cdf, TorchPeer& peer, ShapeResult* r, std::string tag)
      : o_(o),
        engine_(engine),
        stream_(stream),
        cdf_(cdf),
        peer_(peer),
        r_(*r),
        tag_(std::move(tag)),
        s_(r->shape),
        tables_(std::vector<int64_t>(s_.tables, o.rows), std::vector<int64_t>(s_.tables, o.dim)) {}
  void Run();
  bool failed = false;

 private:
  static constexpr engine::Context kGpu = engine::Context::GPU(0);
  void MakeBatch();
  void RunPeer();
  void MakeState();
  void RunGather();
  void RunEmber(const std::string& name, double bytes, const std::function<void()>& push);
  void RunForwardPair(const std::function<void()>& forward, const std::function<void()>& validated);
  void CheckForward();
  void Progress(const std::string& what, const Timing& t, double bytes) const {
    absl::FPrintF(stderr, "[ember-bench-ops] %s: %s %.3f ms, %.0f GB/s\n", tag_, what, t.ms,
                  bytes / t.ms / 1e6);
  }

  const OpsBenchOptions& o_;
  engine::Engine& engine_;
  const Stream& stream_;
  const double* cdf_;
  TorchPeer& peer_;
  ShapeResult& r_;
  const std::string tag_;
  const OpsShape s_;
  const ops::TbeTables tables_;
  const DType index_dtype_ = o_.index64 ? DType::kI64 : DType::kI32;
  Tensor indices_, offsets_, weights_, accumulator_, out_, grad_;
};

void ShapeRun::MakeBatch() {
  const int64_t bags = s_.tables * s_.batch;
  indices_ = Tensor::Empty(engine_, {r_.lookups}, index_dtype_, kGpu);
  offsets_ = Tensor::Empty(engine_, {bags + 1}, index_dtype_, kGpu);
  indices_.WaitToWrite();
  offsets_.WaitToWrite();
  CheckCuda(LaunchZipfIndices(stream_.get(), cdf_, o_.rows, s_.tables, s_.batch * s_.pooling,
                              o_.seed, indices_.data(), o_.index64),
            "kernel launch (ZipfIndices)");
  CheckCuda(LaunchFixedOffsets(stream_.get(), offsets_.data(), bags, s_.pooling, o_.index64),
            "kernel launch (FixedOffsets)");
  DeviceMemory marks(static_cast<std::size_t>(s_.tables * o_.rows));
  DeviceMemory scratch(sizeof(unsigned long long));
  CheckCuda(CountDistinctRows(stream_.get(), indices_.data(), o_.index64, s_.batch * s_.pooling,
                              s_.tables, o_.rows, marks.as<uint8_t>(),
                              scratch.as<unsigned long long>(), &r_.distinct_rows),
            "CountDistinctRows");
}

void ShapeRun::RunPeer() {
  if (!peer_.enabled()) return;
  std::vector<char> host(indices_.bytes());
  CheckCuda(cudaMemcpy(host.data(), indices_.data(), host.size(), cudaMemcpyDeviceToHost),
            "cudaMemcpy (indices to the host)");
  // The peer gets the device to itself: nothing of the last shape is cached.
  storage::GetStorage(storage::MemoryKind::kDevice, 0).ReleaseCached();
  PeerRun run = peer_.Run(s_, host.data());
  for (auto& [name, timing] : run.timings) {
    absl::FPrintF(stderr, "[ember-bench-ops] %s: PyTorch %s %.3f ms\n", tag_, name, timing.ms);
    r_.torch[name] = std::move(timing);
  }
  for (auto& [name, why] : run.errors) {
    absl::FPrintF(stderr, "[ember-bench-ops] %s: PyTorch %s: %s\n", tag_, name, why);
    r_.errors["torch:" + name] = std::move(why);
  }
}

void ShapeRun::MakeState() {
  const int64_t rows = s_.tables * o_.rows;
  weights_ = Tensor::Empty(engine_, {rows * o_.dim}, DType::kF32, kGpu);
  accumulator_ = Tensor::Empty(engine_, {rows}, DType::kF32, kGpu);
  out_ = Tensor::Empty(engine_, {s_.batch, s_.tables * o_.dim}, DType::kF32, kGpu);
  grad_ = Tensor::Empty(engine_, {s_.batch, s_.tables * o_.dim}, DType::kF32, kGpu);
  for (Tensor* t : {&weights_, &accumulator_, &out_, &grad_}) t->WaitToWrite();
  CheckCuda(LaunchFill(stream_.get(), weights_.data<float>(), weights_.numel(), o_.seed + 1, 0.02f),
            "kernel launch (Fill)");
  CheckCuda(LaunchFill(stream_.get(), grad_.data<float>(), grad_.numel(), o_.seed + 2, 0.02f),
            "kernel launch (Fill)");
  CheckCuda(cudaMemsetAsync(accumulator_.data(), 0, accumulator_.bytes(), stream_.get()),
            "cudaMemsetAsync");
  stream_.Sync();
}

void ShapeRun::RunGather() {
  const int64_t per_table = s_.batch * s_.pooling;
  int max_blocks = 0;
  for (int unroll : kGatherUnrolls) {
    int blocks = 0;
    CheckCuda(GatherBlocks(unroll, o_.index64, &blocks), "GatherBlocks");
    max_blocks = std::max(max_blocks, blocks);
  }
  DeviceMemory sink(static_cast<std::size_t>(max_blocks) * 256 * sizeof(float));
  auto launcher = [&](int unroll) {
    int blocks = 0;
    CheckCuda(GatherBlocks(unroll, o_.index64, &blocks), "GatherBlocks");
    return [&, unroll, blocks] {
      CheckCuda(
          LaunchGatherRows(stream_.get(), weights_.data<float>(), indices_.data(), o_.index64,
                           per_table, s_.tables, o_.rows, o_.dim, unroll, blocks, sink.as<float>()),
          "kernel launch (GatherRows)");
    };
  };
  // The unroll factor: the fastest single run of each, after one untimed.
  double best = INFINITY;
  for (int unroll : kGatherUnrolls) {
    const auto launch = launcher(unroll);
    stream_.Time(launch, 1);
    if (const double ms = stream_.Time(launch, 1); ms < best) {
      best = ms;
      r_.gather_unroll = unroll;
    }
  }
  const auto launch = launcher(r_.gather_unroll);
  r_.ember["gather"] = Measure(o_, [&](int iters) { return stream_.Time(launch, iters); });
  Progress(absl::StrCat("gather (unroll ", r_.gather_unroll, ")"), r_.ember["gather"],
           r_.gather_bytes);
}

// The validated forward beside the unvalidated one, run by run: its cost
// is a few percent, the size of the clocks' drift between two blocks of
// runs. Both cases' timings are then the paired ones.
void ShapeRun::RunForwardPair(const std::function<void()>& forward,
                              const std::function<void()>& validated) {
  try {
    auto [plain, checked] = MeasureEnginePaired(o_, engine_, forward, validated);
    r_.ember["forward"] = std::move(plain);
    r_.ember["forward_validate"] = std::move(checked);
    Progress("Ember forward (paired)", r_.ember["forward"], r_.forward_bytes);
    Progress("Ember forward_validate (paired)", r_.ember["forward_validate"], r_.forward_bytes);
  } catch (const std::exception& e) {
    failed = true;
    r_.errors["ember:forward_validate"] = e.what();
    absl::FPrintF(stderr, "[ember-bench-ops] %s: Ember forward_validate failed: %s\n", tag_,
                  e.what());
    try {
      engine_.WaitForAll();
    } catch (const std::exception&) {  // the same error, already recorded
    }
  }
}

void ShapeRun::RunEmber(const std::string& name, double bytes, const std::function<void()>& push) {
  try {
    r_.ember[name] = MeasureEngine(o_, engine_, push);
    Progress("Ember " + name, r_.ember[name], bytes);
  } catch (const std::exception& e) {
    failed = true;
    r_.errors["ember:" + name] = e.what();
    absl::FPrintF(stderr, "[ember-bench-ops] %s: Ember %s failed: %s\n", tag_, name, e.what());
    try {
      engine_.WaitForAll();
    } catch (const std::exception&) {  // the same error, already recorded
    }
  }
}

// Bags 0, B/2 and B-1 of the first and the last table against sums on the
// host of the same rows, before any backward has changed the weights.
void ShapeRun::CheckForward() {
  out_.WaitToRead();
  const int64_t L = s_.pooling;
  const int64_t D = o_.dim;
  const std::size_t isize = o_.index64 ? 8 : 4;
  std::vector<float> out_row(s_.tables * D), row(D);
  std::vector<char> bag(L * isize);
  for (int64_t b : {int64_t{0}, s_.batch / 2, s_.batch - 1}) {
    CheckCuda(cudaMemcpy(out_row.data(), out_.data<float>() + b * s_.tables * D,
                         out_row.size() * sizeof(float), cudaMemcpyDeviceToHost),
              "cudaMemcpy (out)");
    for (int t : {0, s_.tables - 1}) {
      const int64_t first = (t * s_.batch + b) * L;
      CheckCuda(cudaMemcpy(bag.data(), static_cast<const char*>(indices_.data()) + first * isize,
                           bag.size(), cudaMemcpyDeviceToHost),
                "cudaMemcpy (indices)");
      std::vector<double> sum(D, 0.0), magnitude(D, 0.0);
      for (int64_t l = 0; l < L; ++l) {
        const int64_t index = o_.index64 ? reinterpret_cast<const int64_t*>(bag.data())[l]
                                         : reinterpret_cast<const int32_t*>(bag.data())[l];
        CheckCuda(cudaMemcpy(row.data(), weights_.data<float>() + (t * o_.rows + index) * D,
                             D * sizeof(float), cudaMemcpyDeviceToHost),
                  "cudaMemcpy (weights)");
        for (int64_t d = 0; d < D; ++d) {
          sum[d] += row[d];
          magnitude[d] += std::fabs(row[d]);
        }
      }
      for (int64_t d = 0; d < D; ++d) {
        const double got = out_row[t * D + d];
        if (std::fabs(got - sum[d]) > 1e-5 + 1e-4 * magnitude[d]) {
          failed = true;
          r_.errors["ember:forward_check"] = absl::StrFormat(
              "table %d bag %d column %d: Ember %.8g, host sum %.8g", t, b, d, got, sum[d]);
          absl::FPrintF(stderr, "[ember-bench-ops] %s: WRONG forward: %s\n", tag_,
                        r_.errors["ember:forward_check"]);
          return;
        }
      }
    }
  }
  r_.forward_checked = true;
}

void ShapeRun::Run() {
  const double n = double(r_.lookups);
  const double d = o_.dim;
  MakeBatch();
  const double index_bytes = (n + double(s_.tables * s_.batch) + 1) * (o_.index64 ? 8 : 4);
  const double ud = double(r_.distinct_rows);
  r_.gather_bytes = n * d * 4;
  r_.forward_bytes = n * d * 4 + double(s_.batch * s_.tables) * d * 4 + index_bytes;
  r_.sgd_bytes = n * d * 4 + 2 * ud * d * 4 + index_bytes;
  r_.adagrad_bytes = r_.sgd_bytes + 2 * ud * 4;
  absl::FPrintF(stderr, "[ember-bench-ops] %s: %d lookups, %d distinct rows (%.1f%%)\n", tag_,
                r_.lookups, r_.distinct_rows, 100.0 * ud / n);
  RunPeer();
  MakeState();
  RunGather();

  const ops::TbeBatch batch{&indices_, &offsets_, nullptr, s_.batch};
  ops::TbeOptions fast;
  fast.validate = false;
  const auto forward = [&] { ops::EmbeddingBagForward(tables_, weights_, batch, out_, fast); };
  RunEmber("forward", r_.forward_bytes, forward);
  if (r_.ember.contains("forward")) CheckForward();
  if (o_.validate && r_.ember.contains("forward")) {
    ops::TbeOptions checked;
    checked.validate = true;
    RunForwardPair(forward,
                   [&] { ops::EmbeddingBagForward(tables_, weights_, batch, out_, checked); });
  }
  const ops::SgdOptions sgd;
  const ops::RowwiseAdagradOptions adagrad;
  for (const bool deterministic : {false, true}) {
    if (deterministic && !o_.deterministic) break;
    ops::TbeOptions options = fast;
    options.deterministic = deterministic;
    const std::string suffix = deterministic ? "_det" : "";
    RunEmber("sgd" + suffix, r_.sgd_bytes,
             [&] { ops::EmbeddingBagBackwardSgd(tables_, weights_, batch, grad_, sgd, options); });
    RunEmber("adagrad" + suffix, r_.adagrad_bytes, [&] {
      ops::EmbeddingBagBackwardRowwiseAdagrad(tables_, weights_, accumulator_, batch, grad_,
                                              adagrad, options);
    });
  }
}

// Bytes the shape needs on the device, with room for the backward's sort.
double BytesNeeded(const OpsBenchOptions& o, const OpsShape& s, int64_t lookups) {
  const double rows = double(s.tables) * double(o.rows);
  const double isize = o.index64 ? 8 : 4;
  return rows * o.dim * 4 + rows * 5 + 2.0 * double(s.batch * s.tables) * o.dim * 4 +
         double(lookups) * (isize + 4 * (isize + 8));
}

}  // namespace
}  // namespace ops_bench

OpsCasesResult RunOpsCases(const OpsBenchOptions& options) {
  using namespace ops_bench;  // NOLINT: this file's own helpers
  OpsCasesResult result;
  const std::optional<std::string> device = DescribeDevice0(&result.skipped);
  if (!device) return result;
  result.device = *device;
  absl::FPrintF(stderr, "[ember-bench-ops] on %s\n", *device);

  std::unique_ptr<engine::Engine> engine =
      engine::CreateEngine(engine::ParseEngineType(options.engine));
  Stream stream;
  const std::vector<double> host_cdf = ZipfCdf(options.rows, options.zipf);
  DeviceMemory cdf(host_cdf.size() * sizeof(double));
  CheckCuda(cudaMemcpy(cdf.as<double>(), host_cdf.data(), host_cdf.size() * sizeof(double),
                       cudaMemcpyHostToDevice),
            "cudaMemcpy (Zipf table)");
  TorchPeer peer(options);
  if (!peer.enabled()) absl::FPrintF(stderr, "[ember-bench-ops] %s\n", peer.status());

  const int count = static_cast<int>(options.shapes.size());
  for (int i = 0; i < count; ++i) {
    ShapeResult& r = result.shapes.emplace_back();
    r.shape = options.shapes[i];
    r.lookups = r.shape.tables * r.shape.batch * r.shape.pooling;
    const std::string tag = absl::StrFormat("shape %d/%d %s", i + 1, count, ShapeName(r.shape));
    std::size_t free = 0;
    std::size_t total = 0;
    CheckCuda(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
    if (const double need = BytesNeeded(options, r.shape, r.lookups); need > double(free)) {
      r.skipped = absl::StrFormat("needs about %.1f GiB, %.1f GiB free", need / (1 << 30),
                                  double(free) / (1 << 30));
      absl::FPrintF(stderr, "[ember-bench-ops] %s: skipped: %s\n", tag, r.skipped);
      continue;
    }
    {
      ShapeRun run(options, *engine, stream, cdf.as<double>(), peer, &r, tag);
      run.Run();
      result.ember_failed |= run.failed;
    }
    engine->WaitForAll();  // the shape's tensors are deleted through the engine
    storage::GetStorage(storage::MemoryKind::kDevice, 0).ReleaseCached();
  }
  result.torch_info = peer.status();
  BuildOpsTables(options, &result);
  return result;
}

}  // namespace ember::bench
