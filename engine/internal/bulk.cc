#include "engine/internal/bulk.h"

#include <climits>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <fmt/format.h>

#include "engine/base/logging.h"
#include "engine/base/mutex.h"
#include "engine/internal/dependency_engine.h"
#include "engine/internal/thread_state.h"

namespace ember::engine::internal {
namespace {

constexpr uint64_t kNoEngine = ~uint64_t{0};

struct Registry {
  Mutex mu;
  absl::flat_hash_map<uint64_t, DependencyEngine*> engines ABSL_GUARDED_BY(mu);
};

Registry& TheRegistry() {
  // Leaked on purpose: threads may flush their bulks during static destruction.
  static Registry* const registry = new Registry;
  return *registry;
}

DependencyEngine* FindEngine(uint64_t id) {
  Registry& registry = TheRegistry();
  MutexLock lock(&registry.mu);
  auto it = registry.engines.find(id);
  return it == registry.engines.end() ? nullptr : it->second;
}

struct OpenBulk {
  Context ctx;
  int priority = INT_MIN;
  std::vector<SyncFn> fns;
  std::vector<VarHandle> const_vars;
  std::vector<VarHandle> mutable_vars;
};

struct ThreadBulk {
  uint64_t engine_id = kNoEngine;
  int size = 0;
  OpenBulk open;

  // Runs at thread exit (a thread_local): it must not throw, or the
  // process would terminate. A push that fails here (a var deleted meanwhile,
  // a full engine being destroyed) is logged with the bulk's size.
  ~ThreadBulk() {
    const std::size_t ops = open.fns.size();
    try {
      FlushOpen();
    } catch (const std::exception& e) {
      Log().error("dropping {} bulked ops at thread exit: their push failed: {}", ops, e.what());
    } catch (...) {
      Log().error("dropping {} bulked ops at thread exit: their push failed", ops);
    }
  }

  // Pushes the open bulk to its engine, if that engine still exists.
  void FlushOpen() {
    if (open.fns.empty()) return;
    OpenBulk bulk = std::exchange(open, OpenBulk{});
    DependencyEngine* engine = FindEngine(engine_id);
    if (engine == nullptr) {
      Log().error("dropping {} bulked ops of a destroyed engine", bulk.fns.size());
      return;
    }
    const std::string name = fmt::format("Bulk({})", bulk.fns.size());
    Bulk::Submit(
        engine,
        [fns = std::move(bulk.fns)](RunContext ctx, const OnStart& on_start,
                                    const OnComplete& on_complete) {
          on_start();
          for (const SyncFn& fn : fns) fn(ctx);
          on_complete();
        },
        bulk.const_vars, bulk.mutable_vars,
        OpAttrs{bulk.ctx, FnProperty::kNormal, bulk.priority, name});
  }
};

ThreadBulk& CurrentBulk() {
  thread_local ThreadBulk bulk;
  return bulk;
}

// Makes the thread's bulk state belong to `engine`, flushing another's.
ThreadBulk& BulkFor(DependencyEngine* engine, uint64_t id, int default_size) {
  ThreadBulk& bulk = CurrentBulk();
  if (bulk.engine_id != id) {
    bulk.FlushOpen();
    bulk.engine_id = id;
    bulk.size = default_size;
  }
  return bulk;
}

}  // namespace

bool Bulk::Append(DependencyEngine* engine, SyncFn& fn, VarList const_vars, VarList mutable_vars,
                  const OpAttrs& attrs) {
  const ThreadState& thread = CurrentThread();
  if (attrs.prop != FnProperty::kNormal || thread.is_worker || thread.running_op != nullptr) {
    return false;
  }
  // An inline engine (NaiveEngine) promises that a push returns after its op
  // ran; deferring it into a bulk would break that promise, as in MXNet.
  if (engine->executor_->inline_dispatch()) return false;
  ThreadBulk& bulk = BulkFor(engine, engine->id_, engine->options_.bulk_size);
  if (bulk.size <= 1) return false;
  if (!bulk.open.fns.empty() && bulk.open.ctx != attrs.ctx) bulk.FlushOpen();
  engine->executor_->CheckContext(attrs.ctx, "Engine::PushSync", attrs.name);
  VarAccesses checked;  // validates the vars now, so that errors reach this push
  engine->Normalize(const_vars, mutable_vars, "Engine::PushSync", attrs.name, &checked,
                    /*check_generation=*/true);
  OpenBulk& open = bulk.open;
  open.ctx = attrs.ctx;
  open.priority = std::max(open.priority, attrs.priority);
  open.fns.push_back(std::move(fn));
  open.const_vars.insert(open.const_vars.end(), const_vars.span().begin(), const_vars.span().end());
  open.mutable_vars.insert(open.mutable_vars.end(), mutable_vars.span().begin(),
                           mutable_vars.span().end());
  if (static_cast<int>(open.fns.size()) >= bulk.size) bulk.FlushOpen();
  return true;
}

void Bulk::Flush(DependencyEngine* engine) {
  ThreadBulk& bulk = CurrentBulk();
  if (bulk.engine_id == engine->id_) bulk.FlushOpen();
}

int Bulk::SetSize(DependencyEngine* engine, int size) {
  ThreadBulk& bulk = BulkFor(engine, engine->id_, engine->options_.bulk_size);
  bulk.FlushOpen();
  return std::exchange(bulk.size, size);
}

void Bulk::Submit(DependencyEngine* engine, AsyncFn fn, VarList const_vars, VarList mutable_vars,
                  const OpAttrs& attrs) {
  engine->PushUnchecked(std::move(fn), const_vars, mutable_vars, attrs, "Engine::PushSync (bulk)");
}

void Bulk::Register(DependencyEngine* engine) {
  Registry& registry = TheRegistry();
  MutexLock lock(&registry.mu);
  registry.engines[engine->id_] = engine;
}

void Bulk::Unregister(DependencyEngine* engine) {
  Registry& registry = TheRegistry();
  MutexLock lock(&registry.mu);
  registry.engines.erase(engine->id_);
}

}  // namespace ember::engine::internal
