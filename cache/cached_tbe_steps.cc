// The steps of a CachedTbe (cached_tbe.h): each checks its arguments at the
// push, then pushes one engine op with exactly the vars of its row in the
// header's table.

#include <algorithm>
#include <memory>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "cache/cached_tbe.h"
#include "cache/internal/cache_arrays.h"
#include "cache/internal/cache_kernels.h"
#include "cache/internal/cache_push.h"
#include "cache/internal/prefetch_ticket.h"
#include "engine/error.h"
#include "storage/storage.h"

namespace ember::cache {
namespace {

using internal::BatchArgs;
using internal::LocationArgs;
using internal::StepVars;
using storage::DType;
using storage::Tensor;

BatchArgs BatchArgsOf(const ops::TbeBatch& batch) {
  BatchArgs args;
  args.batch_size = batch.batch_size;
  args.num_indices = batch.indices->numel();
  if (batch.indices->dtype() == DType::kI32) {
    args.indices32 = batch.indices->data<int32_t>();
    args.offsets32 = batch.offsets->data<int32_t>();
  } else {
    args.indices64 = batch.indices->data<int64_t>();
    args.offsets64 = batch.offsets->data<int64_t>();
  }
  return args;
}

// The check of a GPU step: reads the fault record its kernels left (pinned
// memory, kept alive by the check) once the GPU work is done.
engine::DeferredCheck FaultCheck(std::shared_ptr<storage::Buffer> record, std::string op) {
  return [record = std::move(record), op = std::move(op)]() -> std::exception_ptr {
    const auto* fault = static_cast<const internal::BatchFault*>(record->data());
    if (fault->kind == internal::kNoFault) return nullptr;
    try {
      internal::ThrowBatchFault(op.c_str(), *fault);
    } catch (...) {
      return std::current_exception();
    }
    return nullptr;
  };
}

// A zeroed fault record in pinned memory, which kernels on `stream` (of
// GPU `device`) write in place. The host writes it first, so the block's
// previous owners (a batch's pinned tensor whose upload may still be in
// flight) are waited for on the host before the zeroing; the release is
// fenced after the kernels on `stream`. The block comes from `device`'s
// pinned pool: its previous owners' fences are then this GPU's, never
// another rank's.
std::shared_ptr<storage::Buffer> NewFaultRecord(int device, void* stream) {
  auto record =
      std::make_shared<storage::Buffer>(storage::GetStorage(storage::MemoryKind::kPinned, device)
                                            .Alloc(sizeof(internal::BatchFault), nullptr));
  *static_cast<internal::BatchFault*>(record->data()) = internal::BatchFault{};
  record->RecordUse(stream);
  return record;
}

engine::FnProperty StepProperty(engine::Context ctx) {
  // On a GPU a prefetch runs on the copy-in workers (their own stream), so
  // that it overlaps the forward of the batch before it. So does a relookup:
  // it follows the next batch's prefetch, and on a compute stream its wait
  // for that prefetch would hold up every compute kernel pushed after it.
  return ctx.is_gpu() ? engine::FnProperty::kCopyToGPU : engine::FnProperty::kNormal;
}

}  // namespace

void CachedTbe::CheckBatch(const char* op, const ops::TbeBatch& batch,
                           const CacheLocations* locations) const {
  if (batch.indices == nullptr || batch.offsets == nullptr) {
    throw InvalidArgument(fmt::format("[{}] the batch needs indices and offsets", op));
  }
  const Tensor& indices = *batch.indices;
  const Tensor& offsets = *batch.offsets;
  for (const Tensor* tensor : {&indices, &offsets}) {
    if (!*tensor || (tensor->dtype() != DType::kI32 && tensor->dtype() != DType::kI64)) {
      throw InvalidArgument(fmt::format("[{}] indices and offsets must be i32 or i64 tensors", op));
    }
    if (tensor->ctx() != options_.ctx) {
      throw InvalidArgument(fmt::format("[{}] the batch is on {}; the cache is on {}", op,
                                        tensor->ctx().ToString(), options_.ctx.ToString()));
    }
  }
  if (indices.dtype() != offsets.dtype()) {
    throw InvalidArgument(fmt::format("[{}] indices are {} but offsets {}; they must match", op,
                                      storage::ToString(indices.dtype()),
                                      storage::ToString(offsets.dtype())));
  }
  if (batch.batch_size < 0) {
    throw InvalidArgument(fmt::format("[{}] batch_size {} is negative", op, batch.batch_size));
  }
  const int64_t expected = tables_.num_tables() * batch.batch_size + 1;
  if (offsets.numel() != expected) {
    throw InvalidArgument(fmt::format(
        "[{}] {} offsets for a cache of {} tables and batch size {}: expected T * B + 1 = {} (a "
        "batch of other tables?)",
        op, offsets.numel(), tables_.num_tables(), batch.batch_size, expected));
  }
  if (locations != nullptr && indices.numel() > locations->capacity()) {
    throw InvalidArgument(fmt::format("[{}] {} indices, but the locations hold {}", op,
                                      indices.numel(), locations->capacity()));
  }
  if (locations != nullptr && locations->tensor().ctx() != options_.ctx) {
    throw InvalidArgument(fmt::format("[{}] the locations are on {}; the cache is on {}", op,
                                      locations->tensor().ctx().ToString(),
                                      options_.ctx.ToString()));
  }
}

void CachedTbe::Prefetch(const ops::TbeBatch& batch, CacheLocations& locations) {
  static constexpr char kOp[] = "CachedTbe::Prefetch";
  CheckBatch(kOp, batch, &locations);
  AdmitUse(kOp, Use::kPrefetch, batch, locations);
  const int64_t timestep = ++timestep_;
  StepVars vars{{home_.var(), tables_meta_.var(), batch.indices->var(), batch.offsets->var()},
                {state_.var(), dirty_.var(), locations.tensor().var()}};
  if (counts_) vars.writes.push_back(counts_.var());
  if (staging_) vars.writes.push_back(staging_.var());
  if (host_staging_) vars.writes.push_back(host_staging_.var());
  const int passes = PassesFor(batch.indices->numel());
  const BatchArgs batch_args = BatchArgsOf(batch);
  const LocationArgs where = internal::LocationsIn(locations.tensor(), locations.capacity());
  storage::StorageManager* scratch_memory = &device_memory_;
  // The op tells the host whether it took the batch's locks (a bad batch
  // changes nothing): see prefetch_ticket.h.
  auto ticket = std::make_shared<internal::PrefetchTicket>();
  auto settler = std::make_shared<internal::TicketSettler>(ticket);
  internal::PushCacheOp(
      engine_, kOp, options_.ctx, StepProperty(options_.ctx), vars,
      [args = args_, batch_args, where, timestep, passes, scratch_memory,
       settler](void* stream) -> engine::DeferredCheck {
        try {
          if (args->device < 0) {
            internal::PrefetchCpu(*args, batch_args, where, timestep, passes);
            settler->Settle(true);
            return {};
          }
          const int64_t bytes =
              internal::PrefetchScratchBytes(*args, batch_args.num_indices, passes);
          storage::Buffer scratch = scratch_memory->Alloc(static_cast<std::size_t>(bytes), stream);
          auto record = NewFaultRecord(args->device, stream);
          internal::PrefetchCuda(*args, batch_args, where, timestep, passes, scratch.data(), bytes,
                                 static_cast<internal::BatchFault*>(record->data()), args->device,
                                 stream);
          scratch.RecordUse(stream);  // reused only after this prefetch's kernels
          return [check = FaultCheck(std::move(record), kOp), settler] {
            std::exception_ptr error = check();
            settler->Settle(error == nullptr);  // a bad batch changed nothing
            return error;
          };
        } catch (...) {
          settler->Settle(false);  // before the op completes with this error
          throw;
        }
      });
  RecordUse(Use::kPrefetch, batch, locations, std::move(ticket));
}

void CachedTbe::Relookup(const ops::TbeBatch& batch, CacheLocations& locations) {
  static constexpr char kOp[] = "CachedTbe::Relookup";
  CheckBatch(kOp, batch, &locations);
  AdmitUse(kOp, Use::kRelookup, batch, locations);
  const StepVars vars{{tables_meta_.var(), batch.indices->var(), batch.offsets->var()},
                      {state_.var(), locations.tensor().var()}};
  const BatchArgs batch_args = BatchArgsOf(batch);
  const LocationArgs where = internal::LocationsIn(locations.tensor(), locations.capacity());
  internal::PushCacheOp(engine_, kOp, options_.ctx, StepProperty(options_.ctx), vars,
                        [args = args_, batch_args, where](void* stream) {
                          if (args->device < 0) {
                            internal::RelookupCpu(*args, batch_args, where);
                          } else {
                            internal::RelookupCuda(*args, batch_args, where, args->device, stream);
                          }
                          return engine::DeferredCheck();
                        });
  RecordUse(Use::kRelookup, batch, locations);
}

void CachedTbe::LookupForInference(const ops::TbeBatch& batch, CacheLocations& locations) {
  static constexpr char kOp[] = "CachedTbe::LookupForInference";
  CheckBatch(kOp, batch, &locations);
  AdmitUse(kOp, Use::kLookup, batch, locations);
  const StepVars vars{
      {state_.var(), tables_meta_.var(), batch.indices->var(), batch.offsets->var()},
      {locations.tensor().var()}};
  const BatchArgs batch_args = BatchArgsOf(batch);
  const LocationArgs where = internal::LocationsIn(locations.tensor(), locations.capacity());
  internal::PushCacheOp(engine_, kOp, options_.ctx, engine::FnProperty::kNormal, vars,
                        [args = args_, batch_args, where](void* stream) {
                          if (args->device < 0) {
                            internal::LookupCpu(*args, batch_args, where);
                            return engine::DeferredCheck();
                          }
                          auto record = NewFaultRecord(args->device, stream);
                          internal::LookupCuda(*args, batch_args, where,
                                               static_cast<internal::BatchFault*>(record->data()),
                                               args->device, stream);
                          return FaultCheck(std::move(record), kOp);
                        });
  RecordUse(Use::kLookup, batch, locations);
}

void CachedTbe::Flush() {
  const StepVars vars{{state_.var(), slots_.var(), tables_meta_.var()},
                      {home_.var(), dirty_.var()}};
  internal::PushCacheOp(engine_, "CachedTbe::Flush", options_.ctx, engine::FnProperty::kNormal,
                        vars, [args = args_](void* stream) {
                          if (args->device < 0) {
                            internal::FlushCpu(*args);
                          } else {
                            internal::FlushCuda(*args, args->device, stream);
                          }
                          return engine::DeferredCheck();
                        });
}

void CachedTbe::Reset() {
  static constexpr char kOp[] = "CachedTbe::Reset";
  if (const int in_flight = batches_in_flight(); in_flight > 0) {
    throw UsageError(
        fmt::format("[{}] {} batch(es) in flight hold slots locked; reset after their Relookup",
                    kOp, in_flight));
  }
  StepVars vars{{tables_meta_.var()}, {home_.var(), state_.var(), slots_.var(), dirty_.var()}};
  if (counts_) vars.writes.push_back(counts_.var());  // LFU's counts start again from zero
  internal::PushCacheOp(engine_, kOp, options_.ctx, engine::FnProperty::kNormal, vars,
                        [args = args_](void* stream) {
                          if (args->device < 0) {
                            internal::FlushCpu(*args);
                            internal::ResetCpu(*args);
                          } else {
                            internal::FlushCuda(*args, args->device, stream);
                            internal::ResetCuda(*args, args->device, stream);
                          }
                          return engine::DeferredCheck();
                        });
  ++resets_;  // the locations filled before name emptied slots now
}

void CachedTbe::Warm(std::span<const int64_t> rows) {
  static constexpr char kOp[] = "CachedTbe::Warm";
  std::vector<int64_t> order;  // the first occurrence of each row, in the given order
  std::unordered_set<int64_t> seen;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] < 0 || rows[i] >= tables_.total_rows()) {
      throw InvalidArgument(fmt::format("[{}] rows[{}] is {}, out of range [0, {}) (linear ids)",
                                        kOp, i, rows[i], tables_.total_rows()));
    }
    if (seen.insert(rows[i]).second) order.push_back(rows[i]);
  }
  const StepVars vars{{home_.var(), tables_meta_.var()},
                      {state_.var(), slots_.var(), dirty_.var()}};
  internal::PushCacheOp(
      engine_, kOp, options_.ctx, engine::FnProperty::kNormal, vars,
      [args = args_, order = std::move(order), timestep = timestep_](void* stream) {
        const auto count = static_cast<int64_t>(order.size());
        if (args->device < 0) {
          internal::WarmCpu(*args, order.data(), count, timestep);
        } else {
          internal::WarmCuda(*args, order.data(), count, timestep, args->device, stream);
        }
        return engine::DeferredCheck();
      });
}

}  // namespace ember::cache
