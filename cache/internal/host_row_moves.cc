#include "cache/internal/host_row_moves.h"

#include <cstring>
#include <utility>

#include "cache/internal/cache_rows.h"
#include "cache/internal/cache_rows_cpu.h"
#include "cache/internal/host_copy_threads.h"

namespace ember::cache::internal {
namespace {

// A row copy waits on memory (a random row of a large home misses the
// caches and the TLB): each thread asks for the rows kRowsAhead copies
// ahead, which halved a copy's time on a 2-core VM (80 to 41 ns for
// 256-byte rows of 3 GiB).
constexpr int64_t kRowsAhead = 16;

void Prefetch(const char* row, int64_t bytes, bool for_write) {
  for (int64_t line = 0; line < bytes; line += 64) {
    if (for_write) {
      __builtin_prefetch(row + line, 1);
    } else {
      __builtin_prefetch(row + line, 0);
    }
  }
}

int64_t Aligned(int64_t bytes) { return (bytes + 15) / 16 * 16; }

}  // namespace

int64_t HostFillBytes(int64_t capacity, int64_t slot_bytes) {
  return kHostFillHeaderBytes + Aligned(capacity * 8) * 2 + Aligned(capacity * 4) +
         2 * Aligned(capacity * slot_bytes);
}

HostFillBuffers CarveHostFills(const HostFills& fills) {
  char* at = static_cast<char*>(fills.pinned);
  auto take = [&](int64_t bytes) {
    char* piece = at;
    at += Aligned(bytes);
    return piece;
  };
  HostFillBuffers b;
  b.header = take(kHostFillHeaderBytes);
  b.fill_rows = reinterpret_cast<int64_t*>(take(fills.capacity * 8));
  b.staged_rows = reinterpret_cast<int64_t*>(take(fills.capacity * 8));
  b.staged_at = reinterpret_cast<uint32_t*>(take(fills.capacity * 4));
  b.staged_data = take(fills.capacity * fills.slot_bytes);
  b.fill_data = take(fills.capacity * fills.slot_bytes);
  return b;
}

void MoveRowsOnHost(const CacheArgs& cache, const HostRowMoves& moves, HostCopyThreads& threads) {
  const auto staged_from = [&](int64_t i) {
    return moves.staged_data + int64_t{moves.staged_at[i]} * moves.slot_bytes;
  };
  const auto home_of = [&](int64_t row) { return static_cast<char*>(HomeRow(cache, row)); };
  // Each part a contiguous range of each list (both in home order).
  threads.Run([&](int part, int parts) {
    const auto range = [&](int64_t n) {
      return std::pair<int64_t, int64_t>{n * part / parts, n * (part + 1) / parts};
    };
    const auto [staged_begin, staged_end] = range(moves.staged);
    for (int64_t i = staged_begin; i < staged_end; ++i) {
      if (i + kRowsAhead < staged_end) {
        Prefetch(staged_from(i + kRowsAhead), moves.slot_bytes, /*for_write=*/false);
        Prefetch(home_of(moves.staged_rows[i + kRowsAhead]), moves.slot_bytes, /*for_write=*/true);
      }
      const int64_t row = moves.staged_rows[i];
      const int table = TableOf(cache, row);
      std::memcpy(HomeRow(cache, table, row), staged_from(i), RowBytes(cache, table));
    }
    const auto [fill_begin, fill_end] = range(moves.fills);
    for (int64_t i = fill_begin; i < fill_end; ++i) {
      if (i + kRowsAhead < fill_end) {
        Prefetch(home_of(moves.fill_rows[i + kRowsAhead]), moves.slot_bytes, /*for_write=*/false);
      }
      const int64_t row = moves.fill_rows[i];
      const int table = TableOf(cache, row);
      std::memcpy(moves.fill_data + i * moves.slot_bytes, HomeRow(cache, table, row),
                  RowBytes(cache, table));
    }
  });
}

}  // namespace ember::cache::internal
