#pragma once

// Bulk: merges consecutive PushSync calls of one thread into one op, as
// MXNet's bulk execution does, to save per-op engine overhead on many tiny
// ops. Each thread has its own bulk size (SetBulkSize; the engine's
// options().bulk_size by default) and its own open bulk.
//
// What is bulked: kNormal sync ops of one context, pushed by a thread that is
// neither an engine worker nor inside an op (those would never flush). The
// open bulk is pushed as one op when it is full, when the context changes,
// before any other call of that engine from this thread, and when the thread
// exits. Its vars are the union of its ops'; its functions run in push order
// and the first to throw fails the whole bulk.
//
// A bulk left open for an engine that has been destroyed is dropped (with an
// error log) rather than pushed to freed memory; engines are found through a
// registry of live engines by id.
//
// Thread safety: every function acts on the calling thread's own state,
// except the registry, which is locked.

#include "engine/engine.h"

namespace ember::engine::internal {

class DependencyEngine;

class Bulk {
 public:
  // Adds the op to this thread's bulk for `engine`, or returns false when it
  // must be pushed alone. Validates the vars (throws like PushSync).
  static bool Append(DependencyEngine* engine, SyncFn& fn, VarList const_vars, VarList mutable_vars,
                     const OpAttrs& attrs);
  // Pushes this thread's open bulk if it belongs to `engine`.
  static void Flush(DependencyEngine* engine);
  // Sets this thread's bulk size for `engine`; returns the previous one.
  static int SetSize(DependencyEngine* engine, int size);

  static void Register(DependencyEngine* engine);
  static void Unregister(DependencyEngine* engine);

  // Pushes a closed bulk as one op (used by the thread's bulk state).
  static void Submit(DependencyEngine* engine, AsyncFn fn, VarList const_vars, VarList mutable_vars,
                     const OpAttrs& attrs);
};

}  // namespace ember::engine::internal
