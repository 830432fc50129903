#pragma once

// OperatorTable: the pre-built ops (Engine::NewOperator) of one engine,
// named by handles laid out as a VarHandle is (handle_bits.h).
//
// DeleteOperator moves the slot to its next generation, so a handle kept
// after it is refused by Push and DeleteOperator instead of being followed
// to a freed operator (MXNet's raw operator pointers are), and a later
// operator in the same slot is not taken for it. The table holds one
// reference to each live operator; every push holds its own (opr_block.h),
// so pushes already made still run after the delete.
//
// Thread safety: thread-safe. Acquire and Remove take a short lock, so a
// Push racing the DeleteOperator of its operator either takes its
// reference first or is refused; it never touches a freed operator.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/base/mutex.h"
#include "engine/engine.h"
#include "engine/internal/opr_block.h"

namespace ember::engine::internal {

class OperatorTable {
 public:
  explicit OperatorTable(uint16_t tag);
  // Leaves the operators still named as they are: the engine releases them
  // first as it goes (ReleaseAll), and a child after fork() must not touch
  // them (the lock may be held by a parent's thread that does not exist
  // there).
  ~OperatorTable() = default;
  OperatorTable(const OperatorTable&) = delete;
  OperatorTable& operator=(const OperatorTable&) = delete;

  // Names `op`, taking over the reference it was made with. Throws Error
  // when every one of the 2^24 slots is live.
  OprHandle Add(Operator* op);

  // A new reference to the operator `handle` names (the caller drops it
  // with Unref). Throws InvalidArgument for a null or foreign handle and
  // UsageError for one whose operator was deleted; `where` begins the
  // message.
  Operator* Acquire(OprHandle handle, std::string_view where);

  // Unnames the operator `handle` names and drops the table's reference.
  // Throws as Acquire.
  void Remove(OprHandle handle, std::string_view where);

  // Unnames every operator and drops the table's references, outside its
  // lock: the engine does so first as it goes, while it still runs the ops
  // that the operators' functions push as they are destroyed (a captured
  // tensor deletes its var).
  void ReleaseAll();

 private:
  struct Slot {
    uint32_t generation = 1;
    Operator* op = nullptr;    // null while the slot is free
    std::string deleted_name;  // of the operator the last Remove unnamed
  };

  // The slot `handle` names, live. Throws as Acquire.
  Slot& Resolve(OprHandle handle, std::string_view where) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const uint16_t tag_;
  Mutex mu_;
  std::vector<Slot> slots_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> free_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ember::engine::internal
