// The TBE steps of a CachedTbe (cached_tbe.h): forward and backward with
// ops' TBE kernels, reading and updating each row in its cache slot or at
// home as the batch's locations say (ops::TbeCachedRows). No second copy of
// the TBE kernels: the cache only tells them where the rows are.

#include <string>

#include <fmt/format.h>

#include "cache/cached_tbe.h"
#include "engine/error.h"

namespace ember::cache {
namespace {

// The ops' options, with the cache's memory for a GPU op's temporaries.
ops::TbeOptions WithMemory(ops::TbeOptions options, engine::Context ctx,
                           storage::StorageManager& device_memory) {
  if (ctx.is_gpu() && options.device_memory == nullptr) options.device_memory = &device_memory;
  return options;
}

}  // namespace

void CachedTbe::Forward(const ops::TbeBatch& batch, const CacheLocations& locations,
                        storage::Tensor& out, const ops::TbeOptions& options) {
  static constexpr char kOp[] = "CachedTbe::Forward";
  CheckBatch(kOp, batch, &locations);
  AdmitUse(kOp, Use::kForward, batch, locations);
  const ops::TbeCachedRows cached{&locations.tensor(), &slots_, nullptr};
  ops::EmbeddingBagForward(tables_, home_, batch, out,
                           WithMemory(options, options_.ctx, device_memory_), &cached);
}

void CachedTbe::ForwardInference(const ops::TbeBatch& batch, const CacheLocations& locations,
                                 storage::Tensor& out, const ops::TbeOptions& options) {
  static constexpr char kOp[] = "CachedTbe::ForwardInference";
  CheckBatch(kOp, batch, &locations);
  AdmitUse(kOp, Use::kInference, batch, locations);
  // Reads the state too: a prefetch pushed later (it writes the state) may
  // refill an unlocked slot, so it must wait for this forward.
  const ops::TbeCachedRows cached{&locations.tensor(), &slots_, &state_};
  ops::EmbeddingBagForward(tables_, home_, batch, out,
                           WithMemory(options, options_.ctx, device_memory_), &cached);
}

void CachedTbe::BackwardSgd(const ops::TbeBatch& batch, const CacheLocations& locations,
                            const storage::Tensor& grad_output, const ops::SgdOptions& sgd,
                            const ops::TbeOptions& options) {
  static constexpr char kOp[] = "CachedTbe::BackwardSgd";
  CheckBatch(kOp, batch, &locations);
  AdmitUse(kOp, Use::kBackward, batch, locations);
  const ops::TbeCachedRows cached{&locations.tensor(), &slots_, nullptr, &dirty_};
  ops::EmbeddingBagBackwardSgd(tables_, home_, batch, grad_output, sgd,
                               WithMemory(options, options_.ctx, device_memory_), &cached);
}

void CachedTbe::BackwardRowwiseAdagrad(const ops::TbeBatch& batch, const CacheLocations& locations,
                                       const storage::Tensor& grad_output,
                                       const ops::RowwiseAdagradOptions& adagrad,
                                       const ops::TbeOptions& options) {
  static constexpr char kOp[] = "CachedTbe::BackwardRowwiseAdagrad";
  CheckBatch(kOp, batch, &locations);
  AdmitUse(kOp, Use::kBackward, batch, locations);
  storage::Tensor& accumulator = MakeAccumulator();
  const ops::TbeCachedRows cached{&locations.tensor(), &slots_, nullptr, &dirty_};
  ops::EmbeddingBagBackwardRowwiseAdagrad(tables_, home_, accumulator, batch, grad_output, adagrad,
                                          WithMemory(options, options_.ctx, device_memory_),
                                          &cached);
}

void CachedTbe::BackwardAdam(const ops::TbeBatch& batch, const CacheLocations& locations,
                             const storage::Tensor& grad_output, int64_t step,
                             const ops::AdamOptions& adam, const ops::TbeOptions& options) {
  static constexpr char kOp[] = "CachedTbe::BackwardAdam";
  CheckBatch(kOp, batch, &locations);
  AdmitUse(kOp, Use::kBackward, batch, locations);
  MakeAdamMoments();
  const ops::TbeCachedRows cached{&locations.tensor(), &slots_, nullptr, &dirty_};
  ops::EmbeddingBagBackwardAdam(tables_, home_, adam_m_, adam_v_, batch, grad_output, step, adam,
                                WithMemory(options, options_.ctx, device_memory_), &cached);
}

}  // namespace ember::cache
