// What the GPU cases share (gpu_run.h): the step loop and the forward
// check. No CUDA calls here: everything goes through the engine.

#include "tools/bench/cache/gpu_run.h"

#include <exception>

#include "absl/strings/str_format.h"
#include "engine/error.h"
#include "ops/elementwise.h"
#include "storage/storage.h"

namespace ember::bench::cache_bench {
namespace {

cache::CacheCounts Minus(const cache::CacheCounts& after, const cache::CacheCounts& before) {
  cache::CacheCounts d;
  d.requested = after.requested - before.requested;
  d.unique = after.unique - before.unique;
  d.unique_misses = after.unique_misses - before.unique_misses;
  d.inserted = after.inserted - before.inserted;
  d.evicted = after.evicted - before.evicted;
  d.unique_conflict_misses = after.unique_conflict_misses - before.unique_conflict_misses;
  d.conflict_miss_indices = after.conflict_miss_indices - before.conflict_miss_indices;
  d.bytes_to_cache = after.bytes_to_cache - before.bytes_to_cache;
  d.bytes_to_home = after.bytes_to_home - before.bytes_to_home;
  return d;
}

}  // namespace

double MillisSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

StepTotals StepLoop(cache::CachedTbe& tbe, const std::vector<BatchTensors>& batches, int first,
                    int steps, cache::CacheLocations& locations, StepWork work) {
  StepTotals totals;
  const cache::CacheCounts before = tbe.TotalStats().all;
  const ops::TbeOptions fast = FastForward();
  // The backward's temporaries from the process-wide pool: a case may
  // count the cache's own memory as the prefetch's temporaries.
  ops::TbeOptions backward = fast;
  backward.device_memory =
      &storage::GetStorage(storage::MemoryKind::kDevice, tbe.options().ctx.device_id);
  for (int i = 0; i < steps; ++i) {
    const ops::TbeBatch batch = batches[(first + i) % batches.size()].view();
    auto start = Clock::now();
    tbe.Prefetch(batch, locations);
    locations.tensor().WaitToRead();
    totals.prefetch_ms += MillisSince(start);
    if (work.out != nullptr) {
      start = Clock::now();
      tbe.Forward(batch, locations, *work.out, fast);
      work.out->WaitToRead();
      totals.forward_ms += MillisSince(start);
    }
    tbe.Relookup(batch, locations);
    if (work.grad != nullptr) {
      tbe.BackwardSgd(batch, locations, *work.grad, {.learning_rate = 0.01f}, backward);
      tbe.home().WaitToRead();  // the next prefetch's time is its own
    }
    locations.tensor().WaitToRead();
  }
  totals.steps = steps;
  totals.counts = Minus(tbe.TotalStats().all, before);
  return totals;
}

storage::Tensor ZeroGrad(engine::Engine& engine, const cache::CachedTbe& tbe, int64_t batch_size) {
  storage::Tensor grad = storage::Tensor::Empty(engine, {batch_size, tbe.tables().total_dim()},
                                                storage::DType::kF32, tbe.options().ctx);
  ops::Fill(grad, 0.0f);
  return grad;
}

ForwardCheck CheckCachedForward(cache::CachedTbe& tbe, const ops::TbeBatch& batch,
                                const cache::CacheLocations& locations, storage::Tensor& out) {
  try {
    tbe.Forward(batch, locations, out, FastForward());
    out.WaitToRead();
  } catch (const Unavailable& e) {
    return {e.what()};
  } catch (const UsageError& e) {
    return {e.what()};
  } catch (const std::exception& e) {
    return {e.what(), /*failed=*/true};
  }
  return {};
}

ops::TbeOptions FastForward() {
  ops::TbeOptions options;
  options.validate = false;
  return options;
}

std::string Gib(double bytes) { return absl::StrFormat("%.1f GiB", bytes / double(1 << 30)); }

}  // namespace ember::bench::cache_bench
