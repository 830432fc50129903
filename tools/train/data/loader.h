#pragma once

// Loader: threads that make HostBatches ahead of the training step. It
// runs a BatchSource a bounded number of batches ahead, in pinned memory
// when the process has a GPU (so that the step's host-to-device copy is a
// DMA) and plain host memory otherwise; the training thread pops ready
// batches.
//
// Threads. One thread reads the source straight through. Where the source
// forks (BatchSource::Fork: the synthetic source) and more threads are
// asked, each thread owns a reader and, whenever it is free, claims the
// next batch not yet claimed (a Seek and a Next on its reader); Pop hands
// them out in source order: the same batches in the same order as one
// thread, made several at a time. A Zipf batch of 8192 x 26 takes a core
// about 16 ms, which one thread cannot hide behind a GPU step. Claiming,
// rather than giving thread t every threads-th batch, matters on a busy
// host: a thread that shares its core with another (an engine worker's
// spin) makes fewer batches instead of holding up every threads-th step.
// On an H200 host with 8 fixed lanes, one slow lane made every 8th step of
// ember-train 3x its median (docs/benchmarks.md, Train).
//
// State model. Running: the threads claim and make batches, each waiting
// while depth + threads are claimed and not popped. Then exactly one of:
// ended (the source returned nullopt), failed (the source or the check
// threw) or stopped (Stop() or the destructor). Pop() returns the batches
// in source order; after the last one it returns nullopt when ended,
// rethrows the source's exception (the InvalidArgument naming file, line
// and field) or the check's at this and every later Pop when failed, and
// returns nullopt when stopped. No batch before the end or the error is
// lost; batches a thread made past them are dropped. Stop() never waits
// for the consumer: it wakes the threads whether they wait or not, waits
// only for the batches in the making (one Next each), and drops what is
// ready.
//
// Thread safety: thread-safe. One consumer pops at a time; Stop() may come
// from any thread, also while another thread waits in Pop() (which then
// returns nullopt).
//
// Memory ordering: what a loader thread wrote into a batch's tensors
// happens before Pop() returns it; the tensors have no pending op.

#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "engine/base/mutex.h"
#include "engine/engine.h"
#include "storage/memory.h"
#include "tools/train/data/batch.h"
#include "tools/train/data/batch_source.h"

namespace ember::train {

struct LoaderOptions {
  // Batches made ahead and waiting for Pop, >= 1: at most depth + threads
  // are claimed and not yet popped (depth ready, one in the making per
  // thread), so that a thread's batch is wanted depth steps after it was
  // claimed at the earliest.
  int depth = 4;
  // Threads, >= 0; 0 picks DefaultLoaderThreads(): all the machine's cores
  // but four (for the training thread and the engine's workers), at least 1
  // and at most 16:
  // on a 16-core H200 host 8 threads left every 6th to 9th step of the GPU
  // preset waiting for its batch (P90 up to twice the P50), 12 kept the P90
  // within 1.3x of the P50 (docs/benchmarks.md, Train). A source that does
  // not fork gets one.
  int threads = 0;
  // The batches' memory: by default kPinned when GpuCount() > 0, else kCpu.
  std::optional<storage::MemoryKind> kind = {};
  // Run by the thread that made a batch, on it, before it is ready (e.g.
  // DlrmModel::CheckBatch): a check costs the training thread nothing and
  // runs threads-wide. What it throws is that batch's error, as if the
  // source had thrown there (see the state model). Must be thread-safe.
  std::function<void(const HostBatch&)> check = {};
};

// The threads a loader takes by default where `loaders` of them share the
// machine (the ranks of a sharded run, each with its own): its cores but
// four a loader (its training thread and engine workers), split among
// them, at least 1 and at most 16.
[[nodiscard]] int DefaultLoaderThreads(int loaders = 1);

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
  void Run(BatchSource* reader);
  // Batch `index` from `reader`, or nullopt past the end.
  std::optional<HostBatch> Make(BatchSource& reader, int64_t index);

  const BatchMemory memory_;
  const int depth_;
  // Used by the threads alone until they have been joined.
  std::unique_ptr<BatchSource> source_;
  std::vector<std::unique_ptr<BatchSource>> forks_;
  const int threads_;    // 1 + forks_.size(): source_ and each fork a thread's reader
  const int64_t start_;  // the source's position at construction
  const std::function<void(const HostBatch&)> check_;

  Mutex mu_;
  CondVar changed_;  // a batch, a claim's room or the state changed
  // Made and not yet popped, by index (batches since construction).
  absl::flat_hash_map<int64_t, HostBatch> ready_ ABSL_GUARDED_BY(mu_);
  int64_t claimed_ ABSL_GUARDED_BY(mu_) = 0;  // the next index to claim
  // The first index past the source's end or at its error; every batch
  // before it is returned, none after.
  int64_t end_ ABSL_GUARDED_BY(mu_) = std::numeric_limits<int64_t>::max();
  std::exception_ptr error_ ABSL_GUARDED_BY(mu_);  // the source's, at end_
  int64_t popped_ ABSL_GUARDED_BY(mu_) = 0;        // batches Pop returned
  int64_t position_ ABSL_GUARDED_BY(mu_);          // after the last of them
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;      // Stop() asked

  Mutex join_mu_;  // serializes Stop()'s join
  std::vector<std::thread> workers_ ABSL_GUARDED_BY(join_mu_);
};

}  // namespace ember::train
