#pragma once

// CachedTbe: table-batched embedding bags whose rows live in host-reachable
// memory ("home": managed or host-mapped pinned memory on a GPU, host memory
// otherwise), with the hot rows cached in a set-associative software cache
// on the cache's context (GPU memory on a GPU), as FBGEMM's TBE with its
// UVM cache. Every step is an engine op over four vars, which is what makes
// a training pipeline only a push order (docs/cache.md):
//
//   op               writes                        reads
//   Prefetch(i)      state, dirty, locations(i)    home, batch(i)
//   Forward(i)       out(i)                        home, slots, locations(i), batch(i)
//   Relookup(i)      state, locations(i)           batch(i)
//   Backward*(i)     slots, dirty, home, optimizer state
//                                                  locations(i), batch(i), grad(i)
//   Flush            home, dirty                   state, slots
//   Reset            home, state, slots, dirty (and LFU's counts)
//   Warm             state, slots, dirty           home
//   LookupForInference  locations                  state, batch
//   ForwardInference    out                        home, slots, state, locations, batch
//
// (home = var uvm_weights, slots = cache_weights, state = cache_state,
// dirty = cache_dirty: a flag per slot whose row a backward updated, which
// CacheOptions::write_back may have evictions and flushes go by.)
// Prefetch(i) also fills unlocked slots and writes evicted rows back home
// without declaring either written: line locking keeps both away from every
// slot and row a batch in flight uses (cache/internal/cache_args.h), so
// Prefetch(i+1) runs while Forward(i) reads.
//
// A batch in flight holds its rows' slots locked from its Prefetch to its
// Relookup, which must come after the next batch's Prefetch and before its
// own Backward (FBGEMM's cache-invalidation fix: a row that missed in batch
// i but was inserted by prefetch(i+1) then gets batch i's update in its
// slot). Baseline order: Prefetch(i), Forward(i), Relookup(i), Backward(i).
// Prefetch order: Prefetch(i+1) before Forward(i), then Relookup(i),
// Backward(i).
//
// Optimizer state stays at home, beside the rows, for cached and uncached
// rows alike (row-wise Adagrad's accumulator, Adam's moments: tensors of
// their own, made on first use, that the backward writes); only the rows
// move between home and slots, so the state is exact whatever is cached.
//
// Thread safety: one thread pushes a cache's ops (their order is the
// pipeline, and the cache checks it against state it keeps on the host,
// unsynchronized); the ops it pushes run on engine workers.

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "cache/cache_options.h"
#include "cache/cache_stats.h"
#include "engine/engine.h"
#include "ops/embedding_bag.h"
#include "storage/storage_manager.h"
#include "storage/tensor.h"

namespace ember::cache {

namespace internal {
struct CacheArgs;
class PrefetchTicket;
// What the steps have done with a CacheLocations, and what a step does
// with one (cached_tbe_locations.cc).
enum class LocationsPhase : uint8_t { kEmpty, kPrefetched, kRelookedUp, kLookedUp };
enum class LocationsUse : uint8_t {
  kPrefetch,
  kLookup,
  kRelookup,
  kForward,
  kBackward,
  kInference
};
}  // namespace internal

class CachedTbe;

// One batch's row locations (var locations(i)): per index the slot holding
// its row or a miss, then the slots the batch locked. Make one per batch in
// flight with CachedTbe::NewLocations; reuse it once that batch's backward
// is pushed (the engine orders the reuse).
//
// State model: the cache keeps, on the host, what was pushed on each
// locations and checks every step against it at the push (UsageError,
// nothing pushed). Empty (new) -> Prefetch -> prefetched (in flight: its
// slots locked) -> Relookup -> relooked up -> Prefetch again, and so on;
// LookupForInference -> looked up. Forward needs prefetched, Backward*
// relooked up, ForwardInference any but empty; each needs the batch these
// locations were filled for (the same indices tensor), filled since the
// cache's last Reset. A prefetch its op refused (a bad batch) takes no
// locks: the locations are then reusable, and its batch not in flight.
class CacheLocations {
 public:
  CacheLocations(CacheLocations&&) noexcept = default;
  CacheLocations& operator=(CacheLocations&&) noexcept = default;

  // The most indices a batch may have.
  [[nodiscard]] int64_t capacity() const { return capacity_; }
  // i32: [capacity] slots (-1: the home row), [capacity] locked slots, and
  // their count as one i64 (two i32) at the end. Zeroed when made.
  [[nodiscard]] const storage::Tensor& tensor() const { return tensor_; }

 private:
  friend class CachedTbe;
  using Phase = internal::LocationsPhase;
  CacheLocations(storage::Tensor tensor, int64_t capacity, const CachedTbe* owner)
      : tensor_(std::move(tensor)), capacity_(capacity), owner_(owner) {}
  storage::Tensor tensor_;
  int64_t capacity_ = 0;
  // The host's record of the pushes (cached_tbe_locations.cc).
  const CachedTbe* owner_ = nullptr;
  Phase phase_ = Phase::kEmpty;
  engine::VarHandle batch_;  // the indices' var of the batch it was filled for
  int64_t resets_ = 0;       // the cache's Reset count when it was filled
  std::shared_ptr<internal::PrefetchTicket> ticket_;  // its prefetch's, while prefetched
};

// The slots (sets of kCacheWays) a CachedTbe of `tables` and `options`
// sizes itself to (CacheOptions, Sizing), without making one: with
// CacheSlotBytes of the widest row, its device bytes. Unchecked: the
// constructor refuses a size below one set or past the i32 locations.
int64_t CacheSlotsFor(const ops::TbeTables& tables, const CacheOptions& options);

class CachedTbe {
 public:
  // The home rows (their values unset: fill home() before the first
  // prefetch) and an empty cache. Memory for the home comes from a manager
  // the cache makes per CacheOptions::home (on a GPU, a kUvm manager);
  // slots, state and temporaries from `device_memory` (default: the
  // process-wide manager of the context's kind). Throws InvalidArgument for
  // a cache smaller than one set or a dtype that is not f32/f16/bf16,
  // Unavailable for a GPU that is missing, OutOfMemory. REQUIRES: `engine`
  // (and `device_memory`) outlive the cache.
  CachedTbe(engine::Engine& engine, ops::TbeTables tables, const CacheOptions& options,
            storage::StorageManager* device_memory = nullptr);
  // Deletes its tensors through the engine: memory goes back once every op
  // pushed on them has run; never blocks.
  ~CachedTbe();
  CachedTbe(const CachedTbe&) = delete;
  CachedTbe& operator=(const CachedTbe&) = delete;

  [[nodiscard]] const ops::TbeTables& tables() const { return tables_; }
  [[nodiscard]] const CacheOptions& options() const { return options_; }
  [[nodiscard]] int64_t num_sets() const { return num_sets_; }
  [[nodiscard]] int64_t num_slots() const;
  [[nodiscard]] int64_t slot_dim() const { return slot_dim_; }
  // The passes a prefetch of `num_indices` indices takes (options).
  [[nodiscard]] int PassesFor(int64_t num_indices) const;

  // Every row, table after table as TbeTables lays them out (var
  // uvm_weights), on the cache's context. Fill it with ops (Fill,
  // RandomUniform, a CopyTo) or on the host after WaitToWrite().
  [[nodiscard]] storage::Tensor& home() { return home_; }
  // The slots ([num_slots, slot_dim], var cache_weights) and the state
  // (var cache_state), for tests and tools; read them only after a wait.
  [[nodiscard]] const storage::Tensor& slots() const { return slots_; }
  [[nodiscard]] const storage::Tensor& state() const { return state_; }

  // Empty locations for batches of up to `max_indices` indices, of this
  // cache only.
  [[nodiscard]] CacheLocations NewLocations(int64_t max_indices);

  // The steps (see the table above). Each checks its arguments at the push
  // and throws InvalidArgument naming what is wrong, before anything is
  // pushed: a batch whose table count or batch size does not fit, tensors
  // on another context, locations too small. Then it checks the locations'
  // state (CacheLocations) and throws UsageError, naming the step and what
  // is wrong, for a step out of order: a Prefetch or LookupForInference
  // into locations in flight, a Relookup of locations not in flight, a
  // Forward or Backward* on locations never prefetched (or, for Forward,
  // relooked up already; for Backward*, not relooked up yet), a step with
  // another batch than the one its locations were filled for, locations of
  // another cache, or locations filled before a Reset (the Backward of a
  // batch relooked up before a Reset would update emptied slots: the update
  // would be lost). A bad index or offset found while the op runs is the
  // op's InvalidArgument, naming the table, the bag and the value, and
  // changes nothing in the cache: the prefetch is refused (see
  // batches_in_flight), and a Forward or Backward* on its locations is
  // skipped with that error while it is unreported, and fails with a
  // UsageError (at the wait, as an op's error) after.
  void Prefetch(const ops::TbeBatch& batch, CacheLocations& locations);
  void Forward(const ops::TbeBatch& batch, const CacheLocations& locations, storage::Tensor& out,
               const ops::TbeOptions& options = {});
  void Relookup(const ops::TbeBatch& batch, CacheLocations& locations);
  void BackwardSgd(const ops::TbeBatch& batch, const CacheLocations& locations,
                   const storage::Tensor& grad_output, const ops::SgdOptions& sgd,
                   const ops::TbeOptions& options = {});
  void BackwardRowwiseAdagrad(const ops::TbeBatch& batch, const CacheLocations& locations,
                              const storage::Tensor& grad_output,
                              const ops::RowwiseAdagradOptions& adagrad,
                              const ops::TbeOptions& options = {});
  // `step` counts from 1, as in ops::EmbeddingBagBackwardAdam.
  void BackwardAdam(const ops::TbeBatch& batch, const CacheLocations& locations,
                    const storage::Tensor& grad_output, int64_t step, const ops::AdamOptions& adam,
                    const ops::TbeOptions& options = {});

  // Inference: looks the batch up without locking or inserting, and its
  // forward reads the state too, so that a later prefetch (which writes the
  // state) cannot refill a slot it reads.
  void LookupForInference(const ops::TbeBatch& batch, CacheLocations& locations);
  void ForwardInference(const ops::TbeBatch& batch, const CacheLocations& locations,
                        storage::Tensor& out, const ops::TbeOptions& options = {});

  // Writes every cached row back home; the cache stays valid.
  void Flush();
  // Writes every cached row back home, empties the cache and, with
  // CachePolicy::kLfu, zeroes every row's count (as FBGEMM's
  // reset_cache_states). Throws
  // UsageError while a batch is in flight (prefetched, not relooked up).
  // Locations filled before it are stale: prefetch their batch again.
  void Reset();
  // Fills free ways with `rows` (linear ids: table's first row + row; a
  // checkpoint's hot rows), in order; rows already cached and rows whose
  // set is full are skipped. Throws InvalidArgument for an id out of range.
  void Warm(std::span<const int64_t> rows);

  // The optimizer state, made (zeroed) by the first backward that needs it
  // or by the Make functions (a checkpoint restored into it before the
  // first step); the accessors return an empty tensor before then.
  // Row-wise Adagrad's accumulator ([total_rows] f32) lives in the cache's
  // own memory, beside the slots: GPU memory on a GPU, 4 bytes a row that
  // every backward reads and writes once per distinct row (at home, over
  // the host link, that cost the backward more than its gradients). Adam's
  // moments ([total_elements] f32 each) live at home, beside the rows.
  storage::Tensor& MakeAccumulator();
  void MakeAdamMoments();
  [[nodiscard]] storage::Tensor& accumulator() { return accumulator_; }
  [[nodiscard]] storage::Tensor& adam_m() { return adam_m_; }
  [[nodiscard]] storage::Tensor& adam_v() { return adam_v_; }

  // Statistics of the last prefetch and since the cache was made. Waits for
  // the ops pushed on the state so far (WaitForVar); a sync point, meant
  // for progress lines, not every step.
  [[nodiscard]] CacheStats LastStepStats();
  [[nodiscard]] CacheStats TotalStats();

  // The state slot by slot, for tests and tools. Waits like the statistics.
  [[nodiscard]] CacheSnapshot Snapshot();
  // CachePolicy::kLfu's count of each row ([total_rows] i64 at home, by
  // linear id: the indices of every prefetch since the cache was made or
  // last Reset), a var that Prefetch and Reset write; an empty tensor under
  // LRU. For tests and tools: read it after a wait on its var.
  [[nodiscard]] const storage::Tensor& lfu_counts() const { return counts_; }

  // Batches prefetched and not yet relooked up. A prefetch that its op
  // refused (a bad batch, or skipped for an earlier op's error) holds no
  // locks and leaves the count once its op has run: after the wait that
  // reported its error (a skipped one: just after), with no Relookup.
  [[nodiscard]] int batches_in_flight() const;

 private:
  using Use = internal::LocationsUse;

  void CheckBatch(const char* op, const ops::TbeBatch& batch,
                  const CacheLocations* locations) const;
  // Checks `use` of `locations` with `batch` at its push (CheckUse) and
  // guards a read of a refused prefetch's locations (GuardRefusedRead).
  void AdmitUse(const char* op, Use use, const ops::TbeBatch& batch,
                const CacheLocations& locations) const;
  // Throws UsageError when `use` of `locations` with `batch` is out of
  // order; nothing changes. True for a read of locations whose prefetch its
  // op refused: not out of order, but it must fail as an op.
  bool CheckUse(const char* op, Use use, const ops::TbeBatch& batch,
                const CacheLocations& locations) const;
  // Fails, as an op, the read of locations whose prefetch its op refused
  // (cached_tbe_locations.cc).
  void GuardRefusedRead(const char* op, const CacheLocations& where) const;
  // Records a fill or a relookup pushed: the locations' new state and the
  // batches in flight. `ticket`: a prefetch's.
  void RecordUse(Use use, const ops::TbeBatch& batch, CacheLocations& locations,
                 std::shared_ptr<internal::PrefetchTicket> ticket = nullptr);
  CacheStats ReadStats(bool total);
  storage::Tensor& OptimizerState(storage::Tensor& state, int64_t elements,
                                  storage::StorageManager& memory);
  void AddStaging(internal::CacheArgs& args);
  // The host's side of copy-engine fills (MappedFills::kCopyEngine), owned
  // with the args by `owner`.
  void AddHostFills(internal::CacheArgs& args, std::shared_ptr<void>& owner);

  engine::Engine& engine_;
  const ops::TbeTables tables_;
  const CacheOptions options_;
  storage::StorageManager& device_memory_;  // slots, state, accumulator, temporaries
  storage::StorageManager& home_memory_;    // home rows, LFU counts, Adam's moments
  int64_t num_sets_ = 0;
  int64_t slot_dim_ = 0;
  storage::Tensor home_;
  storage::Tensor slots_;
  storage::Tensor state_;         // i64: tags, timestamps, locks, stats
  storage::Tensor dirty_;         // i32: a flag per slot
  storage::Tensor counts_;        // LFU: i64 per row, at home; empty for LRU
  storage::Tensor tables_meta_;   // the TbeTables arrays, on the cache's context
  storage::Tensor staging_;       // a mapped home's write-back staging (CacheArgs)
  storage::Tensor host_staging_;  // pinned: its copy-engine fills' lists and rows
  storage::Tensor accumulator_;
  storage::Tensor adam_m_;
  storage::Tensor adam_v_;
  // The kernels' view of the cache (cache/internal/cache_args.h); shared
  // with the ops pushed, which may outlive a step's push, and keeping the
  // host's side of copy-engine fills alive with it.
  std::shared_ptr<const internal::CacheArgs> args_;
  int64_t timestep_ = 0;  // of the last prefetch pushed
  int64_t resets_ = 0;    // Resets pushed
  // The tickets of the batches in flight (prefetched, not relooked up),
  // refused ones included until pruned.
  std::vector<std::shared_ptr<internal::PrefetchTicket>> in_flight_;
};

}  // namespace ember::cache
