#pragma once

// The arrays of a cached TBE and the arguments of its kernels, CPU and CUDA
// alike: declared once, so that both implementations' parity shows here.
//
// Layout.
//  - Home (var uvm_weights): every row of every table, table after table
//    as TbeTables lays them out, in host-reachable memory (managed or
//    host-mapped pinned on a GPU, host memory otherwise). A row is named by
//    its linear id: row + the table's first row.
//  - Slots (var cache_weights): num_sets * kWays rows of slot_dim elements
//    (the largest dim), the home's dtype; slot s of set q is q * kWays + w.
//  - State (var cache_state): per slot a tag (the linear id it holds, or
//    kEmpty), a timestamp (the last timestep that used it) and a lock count;
//    with LFU, per row the number of its indices prefetched (in home memory).
//  - Dirty flags (var cache_dirty): per slot 1 when a backward updated its
//    row since the row was filled, so that its home row is stale.
//  - Locations (var locations(i), one per batch in flight): per index of the
//    batch the slot holding its row, or kMiss; then the slots the batch
//    locked (each once), for the relookup that releases them.
//
// Invariants (with which op may write what):
//  1. A row is in at most one slot, and only in a slot of its set
//     (SetOf(linear id)). A slot's tag and row change only in prefetch,
//     warm and reset, which write cache_state.
//  2. A slot's lock count is the number of batches in flight (prefetched,
//     not yet relooked up) that use it: a prefetch locks each slot its
//     batch uses exactly once (the timestamp says whether this timestep
//     already did), and the relookup of that batch unlocks the same slots.
//  3. A prefetch takes a victim only among unlocked ways whose timestamp is
//     older than the current timestep (never a way locked, or filled or
//     used in this timestep), and writes an evicted row back to its home
//     row first (invariant 5 says which). So it touches no slot an in-flight batch reads or writes,
//     and no home row an in-flight batch uses: it declares neither
//     cache_weights nor uvm_weights written, and runs while forward(i)
//     reads them. What it writes (unlocked slots, home rows of evicted
//     rows) no op in flight reads.
//  4. Victims: LRU, the oldest timestamp first; LFU, the smallest count of
//     the cached row first (-1 for an empty way), then the oldest; ties by
//     way. A set's distinct missed rows are paired with its victims in
//     order: LRU, in increasing linear id, each inserted; LFU (FBGEMM's),
//     in decreasing count (ties in increasing linear id), the r-th inserted
//     only if the r-th victim's count is no larger than its own (so an
//     empty way always). LFU's counts (per row) grow by every index of a
//     pass before its misses are paired. A miss not inserted is a conflict
//     miss and is read and updated at its home row, unless a later pass of
//     the same prefetch admits its row (LFU: its count grew): every index's
//     location is the one its row has after the last pass. Both
//     implementations follow this order, so they agree bit for bit.
//  5. A slot's home row is stale only where its dirty flag is set: the
//     backward sets it for each slot whose row it updates; a fill, a flush
//     and a reset clear it. An evicted or flushed row goes home always
//     (WriteBack::kEveryRow), or only when dirty (kDirtyRows: a clean one
//     equals its home row). Every op that touches the flags writes
//     cache_dirty, so they are never raced.
//
// Thread safety: plain values.

#include <cstdint>

namespace ember::cache::internal {

inline constexpr int kWays = 32;
inline constexpr int64_t kEmpty = -1;  // a tag: the slot holds no row
inline constexpr int32_t kMiss = -1;   // a location: read the home row

enum class RowType : uint8_t { kF32, kF16, kBF16 };
enum class Policy : uint8_t { kLru, kLfu };

// The set of a row: a 64-bit mix (SplitMix64's finalizer) of its linear id,
// so that consecutive ids of every table spread over all sets and tables
// share one cache, scaled to [0, num_sets) by the high half of mix x
// num_sets. A multiply where `mix % num_sets` was a 64-bit division, which
// a GPU runs as a subroutine of some 70 instructions: a tenth of the
// prefetch's insert kernel, and called for every index by the probe, the
// miss sort and the relookup.
#if defined(__CUDACC__)
__host__ __device__
#endif
    inline int64_t
    SetOf(int64_t linear_id, int64_t num_sets) {
  uint64_t x = static_cast<uint64_t>(linear_id);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  const auto n = static_cast<uint64_t>(num_sets);
#if defined(__CUDA_ARCH__)
  return static_cast<int64_t>(__umul64hi(x, n));
#else
  return static_cast<int64_t>((static_cast<unsigned __int128>(x) * n) >> 64);
#endif
}

inline constexpr int kStatTallies = 32;

// Statistics, per table (T rows) then one row of totals, kStatFields each.
enum StatField : int {
  kRequested = 0,         // indices looked up
  kUnique,                // distinct rows, first use in this timestep
  kUniqueMisses,          // of those, not in the cache when looked up
  kInserted,              // rows filled into a slot
  kEvicted,               // rows evicted
  kUniqueConflictMisses,  // distinct missed rows left without a slot (conflict misses)
  kConflictMissIndices,   // their indices (repeats included): read and updated at home
  kBytesToCache,          // bytes copied home -> slots
  kBytesToHome,           // bytes written back slots -> home
  kStatFields,
};

struct HostFills;  // host_row_moves.h

// The cache itself: sizes and arrays, valid for the cache's life.
struct CacheArgs {
  int device = -1;  // the GPU the cache lives on; -1: the CPU
  int num_tables = 0;
  int64_t num_sets = 0;
  int64_t slot_dim = 0;  // elements a slot holds
  RowType row_type = RowType::kF32;
  Policy policy = Policy::kLru;
  bool write_back_every_row = true;  // false: only dirty rows go home (invariant 5)
  int link_warps = 0;                // CacheOptions::link_warps
  // Per table (T) and the T + 1 prefix sums, as in TbeTables. Host memory
  // for the CPU kernels, device memory for the CUDA ones.
  const int64_t* rows = nullptr;
  const int64_t* dims = nullptr;
  const int64_t* row_offsets = nullptr;     // linear id of each table's row 0
  const int64_t* weight_offsets = nullptr;  // element of each table's row 0
  int64_t total_rows = 0;
  void* home = nullptr;            // every row
  bool home_mapped = false;        // host-mapped (not managed) GPU home
  void* slots = nullptr;           // num_sets * kWays * slot_dim
  int64_t* tags = nullptr;         // per slot
  int64_t* timestamps = nullptr;   // per slot
  int32_t* locks = nullptr;        // per slot
  int32_t* dirty = nullptr;        // per slot: 1 where the home row is stale
  int64_t* counts = nullptr;       // LFU: per row (home memory)
  int64_t* stats_step = nullptr;   // (T + 1) * kStatFields, this timestep
  int64_t* stats_total = nullptr;  // (T + 1) * kStatFields, since creation
  // kStatTallies * T * kStatFields, zero between steps: a GPU step counts
  // into these and sums them into the statistics at its end (one counter
  // per statistic, added to by every warp, serialized the atomics: 0.7 ms
  // of a 1 ms insert kernel).
  int64_t* stat_tallies = nullptr;
  // A mapped home's write-back staging (CacheOptions::staging_bytes):
  // staging_capacity rows of slot_dim elements in device memory, and per
  // staged row its linear id and its staging row, in two buffers each (a
  // prefetch sorts them into home order for the way home).
  void* staging = nullptr;
  int64_t* staged_rows[2] = {nullptr, nullptr};
  uint32_t* staged_at[2] = {nullptr, nullptr};
  int64_t staging_capacity = 0;
  // Per slot, the row a prefetch in progress evicted from it without a
  // staging row (valid where its deferred fill says so): a mapped home's.
  int64_t* evicted_of_slot = nullptr;
  // A mapped home's copy-engine fills (MappedFills::kCopyEngine): the
  // host's side, or null (the GPU's warps move the rows).
  HostFills* host_fills = nullptr;
};

// One batch: the TBE layout of ops/embedding_bag.h (indices, T * B + 1
// table-major offsets), exactly one of the 32/64-bit pointer pairs set.
struct BatchArgs {
  int64_t batch_size = 0;  // B
  int64_t num_indices = 0;
  const int32_t* indices32 = nullptr;
  const int64_t* indices64 = nullptr;
  const int32_t* offsets32 = nullptr;
  const int64_t* offsets64 = nullptr;
};

// A batch's locations: per index a slot or kMiss, then the locked slots.
struct LocationArgs {
  int32_t* slot_of = nullptr;  // num_indices entries
  int32_t* locked = nullptr;   // up to num_indices entries
  int64_t* num_locked = nullptr;
};

}  // namespace ember::cache::internal
