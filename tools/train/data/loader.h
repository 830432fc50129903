#pragma once

// Loader: threads that make HostBatches ahead of the training step. It
// runs a BatchSource into bounded queues, in pinned memory when the
// process has a GPU (so that the step's host-to-device copy is a DMA) and
// plain host memory otherwise; the training thread pops ready batches.
//
// Lanes. One thread reads the source straight through. Where the source
// forks (BatchSource::Fork: the synthetic source) and more threads are
// asked, each lane thread owns a reader and makes every threads-th batch
// (lane l makes batches l, l + threads, ...: a Seek and a Next each), and
// Pop takes them round the lanes: the same batches in the same order as
// one thread, made several at a time. A Zipf batch of 8192 x 26 takes a
// core about 16 ms, which one thread cannot hide behind a GPU step.
//
// State model. Running: the lanes fill their queues, each waiting while
// its own is full. Then exactly one of: ended (the source returned
// nullopt), failed (the source threw) or stopped (Stop() or the
// destructor). Pop() returns the batches in source order; after the last
// one it returns nullopt when ended, rethrows the source's exception (the
// InvalidArgument naming file, line and field) at this and every later Pop
// when failed, and returns nullopt when stopped. No batch before the end
// or the error is lost. Stop() never waits for the consumer: it wakes the
// threads whether the queues are full or not, waits only for the batches
// in the making (one Next each), and drops what is queued.
//
// Thread safety: thread-safe. One consumer pops at a time; Stop() may come
// from any thread, also while another thread waits in Pop() (which then
// returns nullopt).
//
// Memory ordering: what a loader thread wrote into a batch's tensors
// happens before Pop() returns it; the tensors have no pending op.

#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "engine/base/mutex.h"
#include "engine/engine.h"
#include "storage/memory.h"
#include "tools/train/data/batch.h"
#include "tools/train/data/batch_source.h"

namespace ember::train {

struct LoaderOptions {
  // Batches made ahead, >= 1: at most max(depth, threads) are held at once
  // (each lane holds at least one).
  int depth = 4;
  // Lane threads, >= 0; 0 picks half the machine's cores, at most 8. A
  // source that does not fork gets one.
  int threads = 0;
  // The batches' memory: by default kPinned when GpuCount() > 0, else kCpu.
  std::optional<storage::MemoryKind> kind = {};
};

class Loader {
 public:
  // Starts the threads, which read `source` from its position. REQUIRES:
  // `engine` outlives the loader and every batch it made. Throws
  // InvalidArgument for a null source, depth < 1, threads < 0 or a kind
  // that is not a host kind.
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

  // Stops the threads and drops the queued batches. Blocks for the batches
  // in the making; idempotent.
  void Stop();

  // The source, back from a stopped (or ended, or failed) loader, standing
  // after the last batch Pop returned; e.g. to Seek(0) and start a next
  // epoch. Stops the loader first. Returns null on a second call.
  [[nodiscard]] std::unique_ptr<BatchSource> TakeSource();

  [[nodiscard]] storage::MemoryKind kind() const { return memory_.kind; }
  [[nodiscard]] int depth() const { return depth_; }
  [[nodiscard]] int threads() const { return threads_; }

 private:
  // One thread's share: every threads()-th batch, from its own reader.
  struct Lane {
    BatchSource* source = nullptr;  // source_ or forks_[l - 1]
    std::deque<HostBatch> queue;
    bool done = false;  // ended or failed at this lane's next batch
    std::exception_ptr error;
  };

  void Run(int lane);
  // Batch `index` from `lane`'s reader, or nullopt past the end.
  std::optional<HostBatch> Make(Lane& lane, int64_t index);

  const BatchMemory memory_;
  const int depth_;
  // Used by the threads alone until they have been joined.
  std::unique_ptr<BatchSource> source_;
  std::vector<std::unique_ptr<BatchSource>> forks_;
  const int threads_;    // lanes: 1 + forks_.size()
  const int64_t start_;  // the source's position at construction

  Mutex mu_;
  CondVar changed_;  // a queue or the state changed
  std::vector<Lane> lanes_ ABSL_GUARDED_BY(mu_);
  int64_t popped_ ABSL_GUARDED_BY(mu_) = 0;    // batches Pop returned
  int64_t position_ ABSL_GUARDED_BY(mu_);      // after the last of them
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;  // Stop() asked

  Mutex join_mu_;  // serializes Stop()'s join
  std::vector<std::thread> workers_ ABSL_GUARDED_BY(join_mu_);
};

}  // namespace ember::train
