#pragma once

// Loader: a thread that makes HostBatches ahead of the training step. It
// runs a BatchSource on its own thread into a bounded queue (depth batches),
// in pinned memory when the process has a GPU (so that the step's
// host-to-device copy is a DMA) and plain host memory otherwise; the
// training thread pops ready batches.
//
// State model. Running: the thread fills the queue, and waits while it is
// full. Then exactly one of: ended (the source returned nullopt), failed
// (the source threw) or stopped (Stop() or the destructor). Pop() returns
// the queued batches in source order; after the last one it returns
// nullopt when ended, rethrows the source's exception (the InvalidArgument
// naming file, line and field) at this and every later Pop when failed,
// and returns nullopt when stopped. No batch the source made before the
// end or the error is lost. Stop() never waits for the consumer: it wakes
// the thread whether the queue is full or not, waits only for the batch in
// the making (one Next), and drops what is queued.
//
// Thread safety: thread-safe. One consumer pops at a time; Stop() may come
// from any thread, also while another thread waits in Pop() (which then
// returns nullopt).
//
// Memory ordering: what the loader thread wrote into a batch's tensors
// happens before Pop() returns it; the tensors have no pending op.

#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <optional>
#include <thread>

#include "engine/base/mutex.h"
#include "engine/engine.h"
#include "storage/memory.h"
#include "tools/train/data/batch.h"
#include "tools/train/data/batch_source.h"

namespace ember::train {

struct LoaderOptions {
  int depth = 4;  // batches made ahead, >= 1
  // The batches' memory: by default kPinned when GpuCount() > 0, else kCpu.
  std::optional<storage::MemoryKind> kind = {};
};

class Loader {
 public:
  // Starts the thread, which reads `source` from its position. REQUIRES:
  // `engine` outlives the loader and every batch it made. Throws
  // InvalidArgument for a null source, depth < 1 or a kind that is not a
  // host kind.
  Loader(engine::Engine& engine, std::unique_ptr<BatchSource> source,
         const LoaderOptions& options = {});
  // Stop().
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // The next batch, blocking until one is ready; nullopt after the last
  // batch or once stopped. Rethrows the source's error after the batches
  // made before it (see the state model).
  [[nodiscard]] std::optional<HostBatch> Pop();

  // Stops the thread and drops the queued batches. Blocks for the batch in
  // the making; idempotent.
  void Stop();

  // The source, back from a stopped (or ended, or failed) loader, standing
  // after the last batch it made; e.g. to Seek(0) and start a next epoch.
  // Stops the loader first. Returns null on a second call.
  [[nodiscard]] std::unique_ptr<BatchSource> TakeSource();

  [[nodiscard]] storage::MemoryKind kind() const { return memory_.kind; }
  [[nodiscard]] int depth() const { return depth_; }

 private:
  void Run();

  const BatchMemory memory_;
  const int depth_;
  // Used by the thread alone until it has been joined.
  std::unique_ptr<BatchSource> source_;

  Mutex mu_;
  CondVar changed_;  // the queue or the state changed
  std::deque<HostBatch> queue_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;     // ended or failed: no batch will follow
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;  // Stop() asked
  std::exception_ptr error_ ABSL_GUARDED_BY(mu_);

  Mutex join_mu_;  // serializes Stop()'s join
  std::thread thread_ ABSL_GUARDED_BY(join_mu_);
};

}  // namespace ember::train
