#pragma once

// PrefetchTicket: what the host learns of a prefetch it pushed, from its op.
// The host counts a batch in flight from its Prefetch's push to its
// Relookup's (cached_tbe_locations.cc), long before the op runs. A prefetch
// whose op changed nothing (it found a bad index or offset, or the engine
// skipped it for an earlier op's error) took no locks, so its batch is not
// in flight: the op refuses the ticket, and the host stops counting it.
//
// The op settles its ticket through a TicketSettler, which its closures
// share: Settle(true) once the locks are taken, Settle(false) on a bad
// batch. A settler destroyed unsettled refuses the ticket: that is how an
// op the engine skipped (its function never called, only dropped) says so.
//
// Thread safety: the ticket is an atomic flag, set by engine workers, read
// by the pushing thread. The settler is used by one op's threads in turn
// (the engine orders its body, its check and its destruction).
//
// Memory ordering: a refusal made in the op's body or fault check is seen
// by refused() in a thread that waited for the op (WaitForVar on a var it
// writes, WaitForAll): the engine orders the wait after them. A skipped
// op's refusal comes when the engine drops the op, just after its
// completion, so a waiter may see it a moment late.

#include <atomic>
#include <memory>
#include <utility>

namespace ember::cache::internal {

class PrefetchTicket {
 public:
  // Whether the op refused the batch: it holds no lock.
  [[nodiscard]] bool refused() const { return refused_.load(std::memory_order_acquire); }
  void Refuse() { refused_.store(true, std::memory_order_release); }

 private:
  std::atomic<bool> refused_{false};
};

class TicketSettler {
 public:
  explicit TicketSettler(std::shared_ptr<PrefetchTicket> ticket) : ticket_(std::move(ticket)) {}
  ~TicketSettler() {
    if (!settled_) ticket_->Refuse();  // never ran: skipped, or dropped unrun
  }
  TicketSettler(const TicketSettler&) = delete;
  TicketSettler& operator=(const TicketSettler&) = delete;

  // The op's verdict: whether it took its batch's locks.
  void Settle(bool took_locks) {
    settled_ = true;
    if (!took_locks) ticket_->Refuse();
  }

 private:
  std::shared_ptr<PrefetchTicket> ticket_;
  bool settled_ = false;  // the op's threads only, which the engine orders
};

}  // namespace ember::cache::internal
