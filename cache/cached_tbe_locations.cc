// How a CachedTbe's steps may use a batch's CacheLocations (cached_tbe.h),
// checked on the host at each push.
//
// Why: the engine orders the steps' ops by their vars, but nothing in the
// ops can tell a step pushed out of order, and each such step reads or
// writes slots at positions the locations do not vouch for: a Forward on
// locations never prefetched reads garbage slots; a second Prefetch into
// locations in flight overwrites the first batch's locked list (its locks
// are never released); a Backward after a Reset updates emptied slots,
// which no flush writes home. So the cache keeps, per locations, what was
// pushed on them:
//
//   phase        after                    may be followed by
//   kEmpty       NewLocations             Prefetch, LookupForInference
//   kPrefetched  Prefetch (in flight)     Forward, ForwardInference, Relookup
//                (refused by its op)      as kEmpty, and Relookup
//   kRelookedUp  Relookup                 Backward*, ForwardInference,
//                                         Prefetch, LookupForInference
//   kLookedUp    LookupForInference       ForwardInference, Prefetch,
//                                         LookupForInference
//
// plus the batch they were filled for (its indices' var) and the cache's
// Reset count then: a Reset empties the slots that relooked-up and
// looked-up locations name (it is refused while a batch is in flight).
//
// Invariants:
//  1. A batch is in flight from its Prefetch's push to its Relookup's, and
//     its ticket is in in_flight_ meanwhile; only then do its locations
//     list locked slots (a nonzero locked count).
//  2. A prefetch its op refused changed nothing, its locked count included
//     (zero: NewLocations zeroes it, and every Relookup and lookup leaves
//     it zero); so a Relookup of it releases nothing, and Prefetch and
//     LookupForInference may reuse its locations.
//  3. The state changes only after the push succeeded: a refused push
//     leaves it as it was.

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "cache/cached_tbe.h"
#include "cache/internal/cache_kernels.h"
#include "cache/internal/cache_push.h"
#include "cache/internal/prefetch_ticket.h"
#include "engine/error.h"

namespace ember::cache {
namespace {

using Phase = internal::LocationsPhase;
using Use = internal::LocationsUse;

const char* Describe(Phase phase) {
  switch (phase) {
    case Phase::kEmpty:
      return "hold no batch (never prefetched)";
    case Phase::kPrefetched:
      return "hold a batch in flight (prefetched, not relooked up)";
    case Phase::kRelookedUp:
      return "hold a batch relooked up already";
    case Phase::kLookedUp:
      return "hold a batch looked up for inference";
  }
  return "?";
}

// The rule that `use` after `phase` breaks, or null. `in_flight`: the
// phase is kPrefetched and the op did not refuse that prefetch.
const char* BrokenRule(Use use, Phase phase, bool in_flight) {
  switch (use) {
    case Use::kPrefetch:
    case Use::kLookup:
      return in_flight ? "refilling them would drop that batch's locked slots, never to be "
                         "released; Relookup it first, or use NewLocations for each batch in "
                         "flight"
                       : nullptr;
    case Use::kRelookup:
      return phase != Phase::kPrefetched ? "each Relookup follows the Prefetch of its batch, once"
                                         : nullptr;
    case Use::kForward:
      return phase != Phase::kPrefetched ? "Forward(i) reads slots only while batch i holds them "
                                           "locked, between Prefetch(i) and Relookup(i)"
                                         : nullptr;
    case Use::kBackward:
      return phase != Phase::kRelookedUp
                 ? "Backward(i) follows Relookup(i), which follows Prefetch(i)"
                 : nullptr;
    case Use::kInference:
      return phase == Phase::kEmpty ? "LookupForInference (or Prefetch) the batch first" : nullptr;
  }
  return nullptr;
}

// The phase a step leaves its locations in; reads leave it as it was.
Phase PhaseAfter(Use use, Phase phase) {
  switch (use) {
    case Use::kPrefetch:
      return Phase::kPrefetched;
    case Use::kLookup:
      return Phase::kLookedUp;
    case Use::kRelookup:
      return Phase::kRelookedUp;
    case Use::kForward:
    case Use::kBackward:
    case Use::kInference:
      break;
  }
  return phase;
}

}  // namespace

CacheLocations CachedTbe::NewLocations(int64_t max_indices) {
  if (max_indices < 0) {
    throw InvalidArgument(
        fmt::format("[CachedTbe::NewLocations] max_indices {} is negative", max_indices));
  }
  const int64_t capacity = max_indices + (max_indices % 2);  // keeps the i64 count aligned
  storage::Tensor tensor = storage::Tensor::Empty(engine_, device_memory_, {2 * capacity + 2},
                                                  storage::DType::kI32, options_.ctx);
  // Zeroed, for invariant 2: the locked count is zero until a prefetch
  // locks slots. The i32 pairs are zeroed as i64 (2 * capacity + 2 is even).
  auto* words = static_cast<int64_t*>(tensor.data());
  const int64_t count = capacity + 1;
  internal::PushCacheOp(
      engine_, "CachedTbe::NewLocations", options_.ctx, engine::FnProperty::kNormal,
      {{}, {tensor.var()}},
      [words, count, device = options_.ctx.is_gpu() ? options_.ctx.device_id : -1](void* stream) {
        if (device < 0) {
          std::fill(words, words + count, int64_t{0});
        } else {
          internal::ZeroCuda(words, count, device, stream);
        }
        return engine::DeferredCheck();
      });
  return CacheLocations(std::move(tensor), capacity, this);
}

int CachedTbe::batches_in_flight() const {
  return static_cast<int>(std::count_if(in_flight_.begin(), in_flight_.end(),
                                        [](const auto& ticket) { return !ticket->refused(); }));
}

void CachedTbe::AdmitUse(const char* op, Use use, const ops::TbeBatch& batch,
                         const CacheLocations& where) const {
  if (CheckUse(op, use, batch, where)) GuardRefusedRead(op, where);
}

bool CachedTbe::CheckUse(const char* op, Use use, const ops::TbeBatch& batch,
                         const CacheLocations& where) const {
  if (where.owner_ != this) {
    throw UsageError(fmt::format("[{}] the locations were made by another CachedTbe", op));
  }
  const bool refused = where.ticket_ != nullptr && where.ticket_->refused();
  const bool in_flight = where.phase_ == Phase::kPrefetched && !refused;
  if (const char* rule = BrokenRule(use, where.phase_, in_flight)) {
    throw UsageError(fmt::format("[{}] the locations {}: {}", op, Describe(where.phase_), rule));
  }
  if (use == Use::kPrefetch || use == Use::kLookup) return false;  // fills: read none of theirs
  if (batch.indices->var() != where.batch_) {
    throw UsageError(fmt::format(
        "[{}] the batch is not the one the locations were filled for (its indices are another "
        "tensor): each step of batch i takes batch i and its locations",
        op));
  }
  // A Relookup closes a refused prefetch too (invariant 2); a read would
  // read slots the locations do not name, Reset or not: it is guarded.
  if (refused && use != Use::kRelookup) return true;
  if (where.resets_ != resets_) {
    throw UsageError(fmt::format(
        "[{}] the cache was Reset after the locations were filled: they name emptied slots, so "
        "{}; prefetch (and relook up) the batch again, or Reset after its Backward",
        op, use == Use::kBackward ? "the update would be lost" : "the rows read would be wrong"));
  }
  return false;
}

// The prefetch's error may not be reported yet (the op refused its ticket
// as it failed; the schedule pushes on without waiting), and then the read
// must be skipped with that error, as the engine skips any reader of a
// failed op's output: so the refusal is an op, not a throw at the push. It
// writes the locations, so the read after it inherits its outcome: while
// the prefetch's error is live on them, the guard inherits that error and
// passes it on unrun; once a wait has reported it, the guard runs and fails
// the read with this UsageError.
void CachedTbe::GuardRefusedRead(const char* op, const CacheLocations& where) const {
  const std::string message = fmt::format(
      "[{}] the Prefetch of this batch was refused (a bad batch, reported before): the "
      "locations name no slot; prefetch a good batch into them",
      op);
  engine_.PushSync([message](engine::RunContext) { throw UsageError(message); }, {},
                   {where.tensor().var()},
                   {.ctx = engine::Context::CPU(), .name = "CachedTbe::RefusedPrefetchGuard"});
}

void CachedTbe::RecordUse(Use use, const ops::TbeBatch& batch, CacheLocations& where,
                          std::shared_ptr<internal::PrefetchTicket> ticket) {
  const Phase next = PhaseAfter(use, where.phase_);
  // Out of flight, if it was (a refused prefetch too), with the refused
  // tickets of other locations: the list stays as short as the pipeline.
  if (where.ticket_ != nullptr) std::erase(in_flight_, where.ticket_);
  std::erase_if(in_flight_, [](const auto& t) { return t->refused(); });
  where.ticket_ = std::move(ticket);
  if (next == Phase::kPrefetched) in_flight_.push_back(where.ticket_);
  where.phase_ = next;
  where.batch_ = batch.indices->var();
  where.resets_ = resets_;
}

}  // namespace ember::cache
