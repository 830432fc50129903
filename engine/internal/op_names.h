#pragma once

// InternOpName: one stable copy of every op name, so that a push stores a
// view instead of copying its name into the op's block. Why: names longer
// than std::string's inline buffer (15 characters, e.g.
// "embedding_bag_forward") would cost an allocation per push, on the pusher,
// freed by a worker: the cross-thread churn the block pool exists to avoid.
//
// Names are kept for the life of the process. A program that makes names
// without end (a step number in every name) stops being interned after
// kMaxNames distinct names; those pushes copy their name as before.
//
// Thread safety: thread-safe. A per-thread cache of recent names answers
// without the table's lock; a hit is confirmed by comparing the text, since
// a caller's buffer may hold another name at the same address next time.

#include <string_view>

namespace ember::engine::internal {

inline constexpr int kMaxNames = 1 << 16;

// A view of the interned copy of `name` (valid for the life of the
// process), or an empty view with `*interned` false when the table is full.
std::string_view InternOpName(std::string_view name, bool* interned);

}  // namespace ember::engine::internal
