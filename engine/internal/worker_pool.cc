#include "engine/internal/worker_pool.h"

#include <pthread.h>

#include <utility>

#include "engine/base/logging.h"
#include "engine/internal/opr_block.h"
#include "engine/internal/thread_state.h"

namespace ember::engine::internal {

namespace {

// After this many continuations in a row a worker lets an op waiting in its
// queue go first (see NextOp).
constexpr int kMaxContinuationRun = 64;

}  // namespace

WorkerPool::WorkerPool(std::string name, int workers, std::unique_ptr<TaskQueue> queue, RunFn run,
                       WorkerPoolOptions options)
    : name_(std::move(name)),
      queue_(std::move(queue)),
      run_(std::move(run)),
      options_(std::move(options)),
      streams_(workers),
      counts_(workers),
      started_(workers) {
  threads_.reserve(workers);
  for (int i = 0; i < workers; ++i) {
    threads_.emplace_back([this, i] { Loop(i); });
    // Thread names show in debuggers and profilers; at most 15 characters.
    pthread_setname_np(threads_.back().native_handle(), name_.substr(0, 15).c_str());
  }
  started_.wait();
}

WorkerPool::~WorkerPool() { Stop(); }

// Running the op it just made ready on the same worker skips a queue round
// trip and a wake-up, and keeps a dependent chain on one warm core.
void WorkerPool::Push(OprBlock* block, bool continuation) {
  if (continuation && options_.continuations && TakeAsContinuation(block)) return;
  queue_->Push(block);
}

bool WorkerPool::TakeAsContinuation(OprBlock* block) {
  ThreadState& thread = CurrentThread();
  if (thread.continuation != nullptr) return false;
  if (thread.pool != this) {
    if (!options_.lend_streams || thread.gpu_device != options_.gpu_device) return false;
    const GpuStream stream = LaneStream();
    if (!stream) return false;
    block->gpu.stream = stream;
  }
  thread.continuation = block;
  thread.continuation_pool = this;
  return true;
}

GpuStream WorkerPool::LaneStream() {
  const int ready = ready_.load(std::memory_order_acquire);
  if (ready < static_cast<int>(streams_.size())) return {};
  return streams_[turn_.fetch_add(1, std::memory_order_relaxed) % streams_.size()];
}

void WorkerPool::Loop(int index) {
  started_.count_down();
  ThreadState& thread = CurrentThread();
  thread.is_worker = true;
  thread.pool = this;
  thread.gpu_device = options_.gpu_device;
  if (options_.make_stream) {
    try {
      streams_[index] = options_.make_stream();
      ready_.fetch_add(1, std::memory_order_release);
    } catch (const std::exception& e) {
      // Not fatal here: the op that needs what failed reports it again, and
      // other pools never lend this one's streams.
      Log().error("worker {} could not start: {}", name_, e.what());
    }
  }
  WorkerCounts& counts = counts_[index];
  while (OprBlock* block = queue_->Pop()) {
    ++counts.popped;
    int run = 0;
    while (block != nullptr) {
      run_(block);
      block = NextOp(&run, counts);
    }
  }
}

// The continuation, except that after a long run of them an op waiting in
// the queue goes first and the continuation is queued (in its own pool) in
// its place: a dependent chain never starves queued ops, and a chain with
// nothing waiting is never cut (cutting it would only hand it to another
// thread, for a chain across pools a sleeping one). The swap, rather than
// queueing the continuation behind the waiting ops, is needed because the
// queue keeps no order between producers: this worker's own push could come
// out first again.
OprBlock* WorkerPool::NextOp(int* run, WorkerCounts& counts) {
  ThreadState& thread = CurrentThread();
  OprBlock* next = std::exchange(thread.continuation, nullptr);
  if (next == nullptr) return nullptr;
  ++counts.continued;
  if (++*run < kMaxContinuationRun) return next;
  *run = 0;
  OprBlock* waiting = queue_->TryPop();
  if (waiting == nullptr) return next;
  ++counts.yielded;
  --counts.continued;
  ++counts.popped;
  thread.continuation_pool->queue_->Push(next);
  return waiting;
}

void WorkerPool::LogCounts() const {
  if (!Log().should_log(spdlog::level::debug)) return;
  WorkerCounts total;
  for (const WorkerCounts& c : counts_) {
    total.popped += c.popped;
    total.continued += c.continued;
    total.yielded += c.yielded;
  }
  if (total.popped == 0) return;
  Log().debug(
      "pool {} ({} workers): {} ops taken from the queue, {} run as continuations, {} "
      "continuations yielded to queued ops",
      name_, counts_.size(), total.popped, total.continued, total.yielded);
}

void WorkerPool::Stop() {
  if (threads_.empty()) return;
  queue_->Close(static_cast<int>(threads_.size()));
  for (auto& thread : threads_) thread.join();
  threads_.clear();
  LogCounts();
}

void WorkerPool::AbandonAfterFork() {
  // pthread_detach on a handle copied from the parent only marks the copied
  // descriptor; the thread itself was never cloned into this process.
  for (auto& thread : threads_) thread.detach();
  threads_.clear();
}

}  // namespace ember::engine::internal
