// SortMissesCuda (miss_sort.h) against a sort on the CPU, on
// fresh random rows, along every way the sort can go: one tile; by set
// alone; by set alone, then on by set and row where a run outgrows a warp;
// by set and row at once; home order. Which way it went is read from its
// long_runs word, so that a case cannot pass on another way than its own.
// Skips without a CUDA device.

#include <cuda_runtime_api.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cache/internal/cache_args.h"
#include "cache/internal/cache_kernels.h"
#include "cache/internal/miss_sort.h"
#include "engine/base/device.h"

namespace ember::cache::internal::cuda {
namespace {

constexpr unsigned long long kNoFault = ~0ull;   // kNoFaultKey
constexpr unsigned long long kUntouched = 0x5a;  // long_runs before a sort

void Check(cudaError_t error, const std::string& what) {
  if (error != cudaSuccess) throw std::runtime_error(what + ": " + cudaGetErrorString(error));
}

// Device memory of `count` elements, freed with it.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(int64_t count) {
    Check(cudaMalloc(&data_, std::max<int64_t>(count, 1) * sizeof(T)), "cudaMalloc");
  }
  ~DeviceArray() { cudaFree(data_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return static_cast<T*>(data_); }

 private:
  void* data_ = nullptr;
};

struct Entry {
  int64_t row;
  uint32_t position;
  bool operator==(const Entry&) const = default;
};

struct Sorted {
  std::vector<Entry> entries;
  unsigned long long long_runs;
};

struct Shape {
  int64_t num_sets = 1;
  int row_bits = 1;
  bool by_home = false;
  unsigned long long fault_key = kNoFault;
};

int BitsOf(int64_t largest) {
  return std::max(1, static_cast<int>(std::bit_width(static_cast<uint64_t>(largest))));
}

// `rows` (positions 0, 1, ...) through SortMissesCuda, with a capacity of
// twice their count, as a prefetch's pass leaves room.
Sorted SortOnGpu(const std::vector<int64_t>& rows, const Shape& shape) {
  const auto count = static_cast<int64_t>(rows.size());
  const int64_t capacity = 2 * count + 1;
  DeviceArray<int64_t> row_buffers[2] = {DeviceArray<int64_t>(capacity),
                                         DeviceArray<int64_t>(capacity)};
  DeviceArray<uint32_t> position_buffers[2] = {DeviceArray<uint32_t>(capacity),
                                               DeviceArray<uint32_t>(capacity)};
  DeviceArray<uint32_t> tile_counts(MissTileCountBytes(capacity) / 4);
  DeviceArray<unsigned long long> words(3);  // count, fault key, long_runs
  const unsigned long long host_words[3] = {static_cast<unsigned long long>(count), shape.fault_key,
                                            kUntouched};
  std::vector<uint32_t> positions(rows.size());
  for (size_t i = 0; i < positions.size(); ++i) positions[i] = static_cast<uint32_t>(i);
  Check(cudaMemcpy(words.get(), host_words, sizeof(host_words), cudaMemcpyHostToDevice), "words");
  Check(cudaMemcpy(row_buffers[0].get(), rows.data(), count * 8, cudaMemcpyHostToDevice), "rows");
  Check(cudaMemcpy(position_buffers[0].get(), positions.data(), count * 4, cudaMemcpyHostToDevice),
        "positions");

  MissSort sort;
  sort.count = words.get();
  sort.fault_key = words.get() + 1;
  sort.long_runs = words.get() + 2;
  sort.capacity = capacity;
  sort.num_sets = shape.num_sets;
  sort.row_bits = shape.row_bits;
  sort.set_bits = BitsOf(shape.num_sets - 1);
  sort.by_home = shape.by_home;
  for (int b = 0; b < 2; ++b) {
    sort.rows[b] = row_buffers[b].get();
    sort.positions[b] = position_buffers[b].get();
  }
  sort.tile_counts = tile_counts.get();
  SortMissesCuda(sort, "miss_sort_cuda_test", nullptr);
  Check(cudaDeviceSynchronize(), "the sort");

  std::vector<int64_t> sorted_rows(rows.size());
  Check(cudaMemcpy(sorted_rows.data(), sort.rows[0], count * 8, cudaMemcpyDeviceToHost), "rows");
  Check(cudaMemcpy(positions.data(), sort.positions[0], count * 4, cudaMemcpyDeviceToHost),
        "positions");
  Sorted result;
  Check(cudaMemcpy(&result.long_runs, sort.long_runs, 8, cudaMemcpyDeviceToHost), "long_runs");
  for (int64_t i = 0; i < count; ++i) result.entries.push_back({sorted_rows[i], positions[i]});
  return result;
}

// The same entries as `rows` (positions 0, 1, ...), in any order.
void ExpectSameEntries(const std::vector<int64_t>& rows, std::vector<Entry> sorted) {
  std::vector<Entry> expected;
  for (size_t i = 0; i < rows.size(); ++i) expected.push_back({rows[i], static_cast<uint32_t>(i)});
  const auto by_row = [](const Entry& a, const Entry& b) {
    return a.row != b.row ? a.row < b.row : a.position < b.position;
  };
  std::sort(expected.begin(), expected.end(), by_row);
  std::sort(sorted.begin(), sorted.end(), by_row);
  ASSERT_EQ(sorted.size(), expected.size());
  EXPECT_TRUE(sorted == expected) << "the sort lost or changed entries";
}

// No entry before its predecessor by `key` (lexicographic keys).
void ExpectOrdered(const std::vector<Entry>& entries,
                   const std::function<std::pair<int64_t, int64_t>(int64_t)>& key,
                   const char* order) {
  for (size_t i = 1; i < entries.size(); ++i) {
    if (key(entries[i].row) < key(entries[i - 1].row)) {
      ADD_FAILURE() << "not in " << order << " order at entry " << i << ": row "
                    << entries[i - 1].row << " before row " << entries[i].row;
      return;
    }
  }
}

class MissSortCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (ember::GpuCount() == 0) GTEST_SKIP() << "no CUDA device";
    const unsigned seed = std::random_device{}();
    random_.seed(seed);
    trace_ = std::make_unique<::testing::ScopedTrace>(__FILE__, __LINE__,
                                                      "seed " + std::to_string(seed));
  }

  // `count` distinct rows below 2^row_bits, at random.
  std::vector<int64_t> DistinctRows(int64_t count, int row_bits) {
    std::uniform_int_distribution<int64_t> row(0, (int64_t{1} << row_bits) - 1);
    std::vector<int64_t> rows;
    while (static_cast<int64_t>(rows.size()) < count) {
      while (static_cast<int64_t>(rows.size()) < count + count / 8 + 8) {
        rows.push_back(row(random_));
      }
      std::sort(rows.begin(), rows.end());
      rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    }
    std::shuffle(rows.begin(), rows.end(), random_);
    rows.resize(count);
    return rows;
  }

  // A prefetch pass's misses and the sort by set: both orders by set, the
  // finer one where `by_row`; and what long_runs then says.
  void ExpectBySet(const std::vector<int64_t>& rows, const Shape& shape, bool by_row,
                   unsigned long long long_runs) {
    const Sorted sorted = SortOnGpu(rows, shape);
    ExpectSameEntries(rows, sorted.entries);
    const int64_t sets = shape.num_sets;
    ExpectOrdered(
        sorted.entries,
        [&](int64_t row) {
          return std::pair{SetOf(row, sets), int64_t{0}};
        },
        "set");
    if (by_row) {
      ExpectOrdered(
          sorted.entries,
          [&](int64_t row) {
            return std::pair{SetOf(row, sets), row};
          },
          "(set, row)");
    }
    EXPECT_EQ(sorted.long_runs, long_runs) << "long_runs: which way the sort went";
  }

  std::mt19937_64 random_;
  std::unique_ptr<::testing::ScopedTrace> trace_;
};

TEST_F(MissSortCudaTest, OneTileSortsBySetAndRow) {
  for (const int64_t count : {int64_t{1}, int64_t{37}, int64_t{kMissTile}}) {
    std::vector<int64_t> rows = DistinctRows(count, 30);
    rows.insert(rows.end(), rows.begin(), rows.begin() + count / 2);  // repeats
    rows.resize(std::min<size_t>(rows.size(), kMissTile));
    std::shuffle(rows.begin(), rows.end(), random_);
    ExpectBySet(rows, {.num_sets = 8192, .row_bits = 30}, /*by_row=*/true, kUntouched);
  }
}

// At most 4 misses a set, none of more than 31: by set alone.
TEST_F(MissSortCudaTest, FewMissesASetAreGroupedBySetAlone) {
  for (const int64_t sets : {int64_t{1024}, int64_t{8192}, int64_t{70000}}) {
    const std::vector<int64_t> rows = DistinctRows(std::min<int64_t>(3 * sets, 150000), 34);
    ExpectBySet(rows, {.num_sets = sets, .row_bits = 34}, /*by_row=*/false, 0);
  }
}

// Few misses a set, but one set with 40: the sort goes on by set and row.
TEST_F(MissSortCudaTest, ARunLongerThanAWarpGoesOnBySetAndRow) {
  constexpr int64_t kSets = 8192;
  std::vector<int64_t> rows = DistinctRows(3 * kSets, 30);
  const int64_t set = SetOf(rows[0], kSets);
  int64_t in_set = std::count_if(rows.begin(), rows.end(),
                                 [&](int64_t row) { return SetOf(row, kSets) == set; });
  for (int64_t row = int64_t{1} << 30; in_set < 40; ++row) {
    if (SetOf(row, kSets) == set) {
      rows.push_back(row);
      ++in_set;
    }
  }
  std::shuffle(rows.begin(), rows.end(), random_);
  ExpectBySet(rows, {.num_sets = kSets, .row_bits = 31}, /*by_row=*/true, 1);
}

// More than 4 misses a set: by set and row at once.
TEST_F(MissSortCudaTest, ManyMissesASetSortBySetAndRow) {
  for (const int64_t sets : {int64_t{1}, int64_t{1000}}) {
    std::vector<int64_t> rows = DistinctRows(40000, 24);
    rows.insert(rows.end(), rows.begin(), rows.begin() + 5000);  // a hot row's repeats
    std::shuffle(rows.begin(), rows.end(), random_);
    ExpectBySet(rows, {.num_sets = sets, .row_bits = 24}, /*by_row=*/true, kUntouched);
  }
}

// Home order, with one, two and three digits of home key (an odd number of
// digits ends in the other buffer, and is copied back).
TEST_F(MissSortCudaTest, MovesSortIntoHomeOrder) {
  for (const int row_bits : {7, 12, 16, 33}) {
    for (const int64_t count : {int64_t{1500}, int64_t{20000}}) {
      SCOPED_TRACE("row_bits " + std::to_string(row_bits) + ", " + std::to_string(count));
      std::uniform_int_distribution<int64_t> row(0, (int64_t{1} << row_bits) - 1);
      std::vector<int64_t> rows(count);
      for (int64_t& r : rows) r = row(random_);
      const Sorted sorted = SortOnGpu(rows, {.row_bits = row_bits, .by_home = true});
      ExpectSameEntries(rows, sorted.entries);
      const int shift = std::max(0, row_bits - kHomeKeyBits);
      ExpectOrdered(
          sorted.entries,
          [&](int64_t r) {
            return std::pair{r >> shift, int64_t{0}};
          },
          "home");
    }
  }
}

// A batch with a fault sorts nothing.
TEST_F(MissSortCudaTest, AFaultSortsNothing) {
  for (const int64_t count : {int64_t{100}, int64_t{10000}}) {
    const std::vector<int64_t> rows = DistinctRows(count, 30);
    const Sorted sorted = SortOnGpu(rows, {.num_sets = 64, .row_bits = 30, .fault_key = 3});
    for (int64_t i = 0; i < count; ++i) {
      ASSERT_EQ(sorted.entries[i], (Entry{rows[i], static_cast<uint32_t>(i)})) << "entry " << i;
    }
  }
}

}  // namespace
}  // namespace ember::cache::internal::cuda
