// The cases of ember-bench-storage (see storage_cases.h). Everything runs in
// one process on device 0. Every run of every case makes a fresh allocator
// per column (a new manager or pool, untimed) and warms it up untimed on the
// same case, so that the timed pass finds the caches as a training loop
// finds them after its first step.

#include "tools/bench/storage/storage_cases.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <optional>
#include <thread>
#include <utility>

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/error.h"
#include "storage/storage.h"
#include "tools/bench/storage/storage_cuda.h"

namespace ember::bench {
namespace storage_bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kWarmUpPairs = 1'000;

double MicrosSince(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

std::string SizeText(std::size_t bytes) {
  if (bytes % (1 << 20) == 0) return absl::StrCat(bytes >> 20, "M");
  if (bytes % (1 << 10) == 0) return absl::StrCat(bytes >> 10, "K");
  return absl::StrCat(bytes);
}

// ---------------------------------------------------------------------------
// The passes.

// --sizes in a fixed pseudo-random order (xorshift64, fixed seed), 256 long:
// the same for every column and run.
std::vector<std::size_t> SizeSequence(const std::vector<std::size_t>& sizes) {
  std::vector<std::size_t> sequence;
  uint64_t x = 88172645463325252ULL;
  for (int i = 0; i < 256; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    sequence.push_back(sizes[x % sizes.size()]);
  }
  return sequence;
}

struct Latencies {
  std::vector<double> alloc_us;
  std::vector<double> free_us;
};

// `pairs` alloc+free pairs on slots [first, first + live), sizes from
// `sequence` from `offset` on: each alloc frees its slot's previous buffer
// first, and the last `live` are freed at the end. Returns the microseconds
// until `stream` is idle. With `latencies`, also times every call alone.
double ReusePass(Allocator& allocator, const std::vector<std::size_t>& sequence, int pairs,
                 int live, int first, int offset, cudaStream_t stream, Latencies* latencies) {
  const auto start = Clock::now();
  const std::size_t n = sequence.size();
  if (latencies == nullptr) {
    for (int i = 0; i < pairs; ++i) {
      const int slot = first + i % live;
      if (i >= live) allocator.Free(slot, stream);
      allocator.Alloc(slot, sequence[(offset + i) % n], stream);
    }
    for (int i = std::max(0, pairs - live); i < pairs; ++i)
      allocator.Free(first + i % live, stream);
  } else {
    latencies->alloc_us.reserve(pairs);
    latencies->free_us.reserve(pairs);
    auto timed_free = [&](int slot) {
      const auto t = Clock::now();
      allocator.Free(slot, stream);
      latencies->free_us.push_back(MicrosSince(t));
    };
    for (int i = 0; i < pairs; ++i) {
      const int slot = first + i % live;
      if (i >= live) timed_free(slot);
      const auto t = Clock::now();
      allocator.Alloc(slot, sequence[(offset + i) % n], stream);
      latencies->alloc_us.push_back(MicrosSince(t));
    }
    for (int i = std::max(0, pairs - live); i < pairs; ++i) timed_free(first + i % live);
  }
  CheckCuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  return MicrosSince(start);
}

// ReusePass on every stream at once, a thread each, started together;
// returns the microseconds from the start until the last one is done.
double ThreadsPass(Allocator& allocator, const std::vector<std::size_t>& sequence, int pairs,
                   int live, const std::vector<cudaStream_t>& streams) {
  const int threads = static_cast<int>(streams.size());
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::exception_ptr> errors(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      try {
        CheckCuda(cudaSetDevice(0), "cudaSetDevice");
      } catch (...) {
        errors[t] = std::current_exception();
      }
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      if (errors[t]) return;
      try {
        // Offsets apart in the sequence: the threads ask for different sizes.
        ReusePass(allocator, sequence, pairs, live, t * live, t * 37, streams[t], nullptr);
      } catch (...) {
        errors[t] = std::current_exception();
      }
    });
  }
  while (ready.load() < threads) std::this_thread::yield();
  const auto start = Clock::now();
  go.store(true, std::memory_order_release);
  for (std::thread& worker : workers) worker.join();
  const double micros = MicrosSince(start);
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  return micros;
}

// ---------------------------------------------------------------------------
// The bench: runs, figures and the table.

class StorageBench {
 public:
  StorageBench(const StorageBenchOptions& options, std::vector<std::string> columns)
      : options_(options),
        columns_(std::move(columns)),
        sequence_(SizeSequence(options.sizes)),
        streams_(std::max(1, options.threads)) {}

  void RunReuse(int run);
  void RunBusy(int run);
  void RunThreads(int run);
  void AddRows(Table* table);
  Results& samples() { return samples_; }
  [[nodiscard]] const std::vector<std::string>& descriptions() const { return descriptions_; }

 private:
  cudaStream_t stream() const { return streams_.all().front(); }
  void Record(const std::string& key, const std::string& column, double value) {
    samples_.Add(key, column, value);
  }
  void AddRow(Table* table, const std::string& key, const char* unit, std::string label);

  const StorageBenchOptions& options_;
  const std::vector<std::string> columns_;
  const std::vector<std::size_t> sequence_;
  Streams streams_;
  Results samples_;
  std::vector<std::string> descriptions_;  // the last reuse run's, by column
};

void StorageBench::RunReuse(int run) {
  const int pairs = options_.pairs;
  const int live = options_.live;
  descriptions_.clear();
  for (const std::string& column : columns_) {
    std::unique_ptr<Allocator> allocator = MakeAllocator(column, live);
    ReusePass(*allocator, sequence_, std::min(pairs, kWarmUpPairs), live, 0, 0, stream(), nullptr);
    const double micros = ReusePass(*allocator, sequence_, pairs, live, 0, 0, stream(), nullptr);
    Latencies latencies;
    ReusePass(*allocator, sequence_, pairs, live, 0, 0, stream(), &latencies);
    const double ns = 1e3 * micros / pairs;
    Record("reuse_pair_ns", column, ns);
    Record("reuse_pairs_per_s", column, 1e9 / ns);
    Record("reuse_alloc_p50", column, Percentile(latencies.alloc_us, 0.5));
    Record("reuse_alloc_p99", column, Percentile(latencies.alloc_us, 0.99));
    Record("reuse_free_p50", column, Percentile(latencies.free_us, 0.5));
    Record("reuse_free_p99", column, Percentile(latencies.free_us, 0.99));
    absl::FPrintF(stderr,
                  "[ember-bench-storage] run %d reuse   %-12s %10.1f ns/pair   alloc p50 %.2f us   "
                  "free p50 %.2f us\n",
                  run + 1, column, ns, samples_.Samples("reuse_alloc_p50", column).back(),
                  samples_.Samples("reuse_free_p50", column).back());
    if (const std::string text = allocator->Describe(); !text.empty()) {
      descriptions_.push_back(absl::StrCat(column, ", last reuse run: ", text));
    }
  }
}

void StorageBench::RunBusy(int run) {
  for (const std::string& column : columns_) {
    std::unique_ptr<Allocator> allocator = MakeAllocator(column, 1);
    std::vector<double> free_us;
    int running = 0;
    for (int i = -1; i < options_.busy_samples; ++i) {  // -1: the warm-up
      allocator->Alloc(0, options_.busy_bytes, stream());
      LaunchBusyKernel(stream(), allocator->data(0), options_.busy_us);
      const auto start = Clock::now();
      allocator->Free(0, stream());
      const double micros = MicrosSince(start);
      const bool busy = StreamBusy(stream());
      CheckCuda(cudaStreamSynchronize(stream()), "cudaStreamSynchronize");
      if (i < 0) continue;
      free_us.push_back(micros);
      running += busy ? 1 : 0;
    }
    const double pct = 100.0 * running / options_.busy_samples;
    Record("busy_free_p50", column, Percentile(free_us, 0.5));
    Record("busy_free_max", column, *std::max_element(free_us.begin(), free_us.end()));
    Record("busy_running_pct", column, pct);
    absl::FPrintF(stderr,
                  "[ember-bench-storage] run %d busy    %-12s free p50 %.2f us, max %.2f us; "
                  "kernel still running after %.0f%% of frees\n",
                  run + 1, column, Percentile(free_us, 0.5),
                  samples_.Samples("busy_free_max", column).back(), pct);
  }
}

void StorageBench::RunThreads(int run) {
  const int pairs = options_.thread_pairs;
  const int live = options_.live;
  const int threads = options_.threads;
  for (const std::string& column : columns_) {
    if (column == kMalloc) continue;
    std::unique_ptr<Allocator> allocator = MakeAllocator(column, threads * live);
    ThreadsPass(*allocator, sequence_, std::min(pairs, kWarmUpPairs), live, streams_.all());
    const double micros = ThreadsPass(*allocator, sequence_, pairs, live, streams_.all());
    const double rate = 1e6 * threads * pairs / micros;
    Record("threads_pairs_per_s", column, rate);
    absl::FPrintF(stderr, "[ember-bench-storage] run %d threads %-12s %12.0f pairs/s\n", run + 1,
                  column, rate);
  }
}

void StorageBench::AddRow(Table* table, const std::string& key, const char* unit,
                          std::string label) {
  table->AddRow(samples_, key, unit, std::move(label));
}

// Ratios pair each run of a column with the same run of the other one, a
// moment apart, so that a slow spell of the machine cancels out.
void StorageBench::AddRows(Table* table) {
  for (const std::string& column : columns_) {
    if (column == kMalloc) continue;
    samples_.AddRatios("reuse_vs_malloc", column, "reuse_pair_ns", kMalloc, "reuse_pair_ns",
                       column);
    if (column == kMallocAsync) continue;
    samples_.AddRatios("reuse_vs_async", column, "reuse_pair_ns", kMallocAsync, "reuse_pair_ns",
                       column);
    samples_.AddRatios("threads_vs_async", column, "threads_pairs_per_s", column,
                       "threads_pairs_per_s", kMallocAsync);
  }
  AddRow(table, "reuse_pair_ns", "ns/pair", "alloc+free, reused sizes: per pair");
  AddRow(table, "reuse_pairs_per_s", "pairs/s", "  pairs per second");
  AddRow(table, "reuse_vs_malloc", "x", "  speedup over cudaMalloc/cudaFree");
  AddRow(table, "reuse_vs_async", "x", "  speedup over cudaMallocAsync");
  AddRow(table, "reuse_alloc_p50", "us", "  alloc alone p50");
  AddRow(table, "reuse_alloc_p99", "us", "  alloc alone p99");
  AddRow(table, "reuse_free_p50", "us", "  free alone p50");
  AddRow(table, "reuse_free_p99", "us", "  free alone p99");
  AddRow(table, "busy_free_p50", "us",
         absl::StrCat("free during ", options_.busy_us, " us kernel: host p50"));
  AddRow(table, "busy_free_max", "us", "  host max");
  AddRow(table, "busy_running_pct", "%", "  kernel still running after free");
  AddRow(table, "threads_pairs_per_s", "pairs/s",
         absl::StrCat("alloc+free, ", options_.threads, " threads at once"));
  AddRow(table, "threads_vs_async", "x", "  speedup over cudaMallocAsync");
  AddRow(table, "trace_delete_p50", "us", "engine delete op (trace): host p50");
  AddRow(table, "trace_delete_max", "us", "  host max");
  AddRow(table, "trace_kernel_p50", "us", "  kernel op's GPU span p50");
  AddRow(table, "trace_overlap_pct", "%", "  delete ended while kernel ran");

  table->targets.push_back(
      {"pooled alloc+free vs cudaMalloc/cudaFree", "reuse_vs_malloc", 10, true});
  table->targets.push_back({"pooled alloc+free vs cudaMallocAsync", "reuse_vs_async", 1, true});
  table->targets.push_back(
      {"free during kernel: kernel still running", "busy_running_pct", 100, true});
  table->targets.push_back({"free during kernel: host max (1% kernel)", "busy_free_max",
                            options_.busy_us / 100.0, false});
  table->targets.push_back(
      {"engine delete ends while kernel runs", "trace_overlap_pct", 100, true});
}

std::vector<std::string> OptionNotes(const StorageBenchOptions& o) {
  std::vector<std::string> sizes;
  for (std::size_t size : o.sizes) sizes.push_back(SizeText(size));
  return {
      absl::StrFormat("reuse: %d pairs a run of sizes %s in a fixed pseudo-random order, %d "
                      "buffers alive at once, one stream; %d pairs of warm-up untimed",
                      o.pairs, absl::StrJoin(sizes, ","), o.live, std::min(o.pairs, kWarmUpPairs)),
      absl::StrFormat("busy: %d frees of a %s buffer that a %d us kernel writes; host time of "
                      "the free, then cudaStreamQuery",
                      o.busy_samples, SizeText(o.busy_bytes), o.busy_us),
      absl::StrFormat("threads: %d threads, a stream each, %d pairs each (cudaMalloc not run)",
                      o.threads, o.thread_pairs),
      "Ember round/async: CreateStorageManager(kDevice, 0) with device_pool kRound/kCudaAsync; "
      "MallocAsync: cudaMallocFromPoolAsync/cudaFreeAsync on a pool of its own, release "
      "threshold UINT64_MAX",
      absl::StrFormat("median of %d runs, columns round-robin in one process", o.repeat),
  };
}

}  // namespace
}  // namespace storage_bench

StorageCasesResult RunStorageCases(const StorageBenchOptions& options) {
  using namespace storage_bench;  // NOLINT: this file's own helpers
  StorageCasesResult result;
  Table& table = result.table;
  table.title = "Storage (device memory)";
  table.target_column = kRound;
  const std::optional<std::string> device = DescribeDevice0(&result.skipped);
  if (!device) return result;
  result.device = *device;
  absl::FPrintF(stderr, "[ember-bench-storage] on %s\n", *device);

  // Columns in a fixed order, whatever the order of --allocators.
  const std::pair<const char*, const char*> kColumns[] = {{"round", kRound},
                                                          {"cuda_async", kAsync},
                                                          {"malloc_async", kMallocAsync},
                                                          {"malloc", kMalloc}};
  std::vector<EmberColumn> ember_columns;
  for (const auto& [name, column] : kColumns) {
    if (std::find(options.allocators.begin(), options.allocators.end(), name) ==
        options.allocators.end()) {
      continue;
    }
    table.columns.push_back(column);
    if (column == std::string_view(kRound)) {
      ember_columns.push_back({column, storage::DevicePoolType::kRound});
    } else if (column == std::string_view(kAsync)) {
      ember_columns.push_back({column, storage::DevicePoolType::kCudaAsync});
    }
  }

  StorageBench bench(options, table.columns);
  {
    // Loads the kernel's module and makes the context, untimed.
    std::unique_ptr<Allocator> warm = MakeAllocator(kMalloc, 1);
    warm->Alloc(0, 4096, nullptr);
    LaunchBusyKernel(nullptr, warm->data(0), 0);
    CheckCuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    warm->Free(0, nullptr);
  }
  for (int run = 0; run < options.repeat; ++run) {
    if (options.reuse) bench.RunReuse(run);
    if (options.busy) bench.RunBusy(run);
    if (options.threaded) bench.RunThreads(run);
  }
  std::vector<std::string> profile_notes;
  if (!options.profile_path.empty()) {
    RunProfileCase(options, ember_columns, &bench.samples(), &profile_notes);
  }
  bench.AddRows(&table);
  table.notes.push_back(absl::StrCat("device: ", *device));
  for (std::string& note : OptionNotes(options)) table.notes.push_back(std::move(note));
  for (const std::string& note : bench.descriptions()) table.notes.push_back(note);
  for (std::string& note : profile_notes) table.notes.push_back(std::move(note));
  result.samples = std::move(bench.samples());
  return result;
}

}  // namespace ember::bench
