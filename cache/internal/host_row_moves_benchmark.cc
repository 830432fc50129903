// The host's gather of a copy-engine prefetch (MoveRowsOnHost) on its own,
// CPU only (Google Benchmark; a white-box benchmark of an internal, beside
// it). Every case moves the same bytes, so their bytes_per_second read side
// by side:
//   BM_CopyInOne      one memcpy of the gather's bytes from home: the
//                     bound a gather of scattered rows approaches;
//   BM_RowByRow       the same rows copied one by one on the calling
//                     thread: the serial reference;
//   BM_MoveRowsOnHost/threads:N   the gather itself, its parts claimed by
//                     N threads (HostCopyThreads), the caller's included.
// The rows: 50,000 (about a training step's new rows on the GPU preset)
// random 256-byte rows of a 1 GiB f32 home, in home order
// as a prefetch lists them. Run beside a busy core (`yes > /dev/null &`)
// to see what claiming parts does for a thread the host starts late
// (docs/benchmarks.md, "The gather's parts claimed, not dealt").
//
//   build/bin/host_row_moves_benchmark --benchmark_repetitions=5 \
//       --benchmark_report_aggregates_only=true

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "cache/internal/cache_rows.h"
#include "cache/internal/cache_rows_cpu.h"
#include "cache/internal/host_copy_threads.h"
#include "cache/internal/host_row_moves.h"

namespace ember::cache::internal {
namespace {

constexpr int64_t kDim = 64;                                    // f32: 256-byte rows
constexpr int64_t kHomeRows = (int64_t{1} << 30) / (kDim * 4);  // 1 GiB
constexpr int64_t kRowsMoved = 50'000;

// One table's home, the rows a prefetch would list and the pinned rows
// they go to; built once for every case.
struct Gather {
  std::vector<float> home;
  std::vector<int64_t> rows_list;
  std::vector<char> data;
  int64_t table_rows[1] = {kHomeRows};
  int64_t dims[1] = {kDim};
  int64_t row_offsets[2] = {0, kHomeRows};
  int64_t weight_offsets[2] = {0, kHomeRows* kDim};
  CacheArgs cache;
  HostFillBuffers buffers;

  Gather() : home(kHomeRows * kDim), data(kRowsMoved * kDim * 4) {
    std::mt19937_64 rng(1);
    std::uniform_real_distribution<float> value(-1, 1);
    for (float& v : home) v = value(rng);  // touched: no first-use faults in a timing
    std::uniform_int_distribution<int64_t> row(0, kHomeRows - 1);
    rows_list.resize(kRowsMoved);
    for (int64_t& r : rows_list) r = row(rng);
    std::sort(rows_list.begin(), rows_list.end());
    cache.num_tables = 1;
    cache.rows = table_rows;
    cache.dims = dims;
    cache.row_offsets = row_offsets;
    cache.weight_offsets = weight_offsets;
    cache.total_rows = kHomeRows;
    cache.slot_dim = kDim;
    cache.home = home.data();
    buffers.fill_rows = rows_list.data();
    buffers.fill_data = data.data();
  }

  int64_t bytes() const { return kRowsMoved * SlotBytes(cache); }
};

Gather& TheGather() {
  static Gather* gather = new Gather();  // 1 GiB, kept for every case
  return *gather;
}

void Account(benchmark::State& state, const Gather& g) {
  state.SetBytesProcessed(state.iterations() * g.bytes());
  state.SetItemsProcessed(state.iterations() * kRowsMoved);
}

void BM_CopyInOne(benchmark::State& state) {
  Gather& g = TheGather();
  for (auto _ : state) {
    std::memcpy(g.buffers.fill_data, g.home.data(), g.bytes());
    benchmark::ClobberMemory();
  }
  Account(state, g);
}
BENCHMARK(BM_CopyInOne)->UseRealTime();

void BM_RowByRow(benchmark::State& state) {
  Gather& g = TheGather();
  const int64_t row_bytes = SlotBytes(g.cache);
  for (auto _ : state) {
    for (int64_t i = 0; i < kRowsMoved; ++i) {
      std::memcpy(g.buffers.fill_data + i * row_bytes, HomeRow(g.cache, g.rows_list[i]), row_bytes);
    }
    benchmark::ClobberMemory();
  }
  Account(state, g);
}
BENCHMARK(BM_RowByRow)->UseRealTime();

void BM_MoveRowsOnHost(benchmark::State& state) {
  Gather& g = TheGather();
  HostCopyThreads threads(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    MoveRowsOnHost(g.cache, g.buffers, kRowsMoved, threads);
    benchmark::ClobberMemory();
  }
  Account(state, g);
}
BENCHMARK(BM_MoveRowsOnHost)->ArgName("threads")->Arg(1)->Arg(2)->Arg(4)->Arg(8)->UseRealTime();

}  // namespace
}  // namespace ember::cache::internal

BENCHMARK_MAIN();
