#include "tools/train/dist/in_process_communicator.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include <absl/strings/str_join.h>
#include <fmt/format.h>

#include "engine/base/mutex.h"
#include "engine/error.h"

// The rendezvous. Collective n is each rank's n-th call (counted per rank,
// so the same n on every rank is the same collective when the ranks keep
// the contract). Each collective is a post, a check, an exchange and a
// departure:
//
// 1. posted_[r] == n from rank r's arrival at collective n; slots_[r]
//    then holds its call.
// 2. ready_ == n once every rank posted n and the checks passed. The last
//    rank to arrive checks (or sets failure_) and wakes the others.
// 3. The exchange of n runs outside the lock: between ready_ >= n and every
//    finished_[p] >= n, nobody writes slots_ or inputs_; each rank reads
//    its peers' send buffers and inputs_, and writes only its own recv or
//    data.
// 4. A rank returns from n only once every finished_[p] >= n. So no rank
//    reads its buffers after it returned, and no rank posts n + 1 (which
//    rewrites its slot and input) while a peer still reads them.
// 5. failure_, once set, stays: it is the first failure, and every later
//    call throws it. Only the wait before the exchange can fail or time
//    out. The departure wait (4) has neither: a rank that left early would
//    leave its peers reading freed buffers, and once every rank arrived all
//    that remains is copying.

namespace ember::train {
namespace {

using Clock = std::chrono::steady_clock;

enum class Kind { kAllToAllV, kAllReduceSum, kBarrier };

std::string_view KindName(Kind kind) {
  switch (kind) {
    case Kind::kAllToAllV:
      return "AllToAllV";
    case Kind::kAllReduceSum:
      return "AllReduceSum";
    case Kind::kBarrier:
      return "Barrier";
  }
  return "?";
}

// One rank's call, as its peers see it in its slot.
struct Call {
  Kind kind = Kind::kBarrier;
  std::string what;
  std::span<const std::byte> send = {};  // AllToAllV
  std::span<const int64_t> send_bytes = {};
  std::span<std::byte> recv = {};
  std::span<const int64_t> recv_bytes = {};
  std::span<float> data = {};  // AllReduceSum
};

// "AllToAllV('indices of batch 7')".
std::string Describe(const Call& call) {
  return fmt::format("{}('{}')", KindName(call.kind), call.what);
}

// CondVar (engine/base/mutex.h) has no timed wait. std::condition_variable_any
// waits on any lockable, so this adapter lets it wait on an annotated Mutex
// that the caller holds (the analysis cannot follow the wait's unlock and
// relock, which leave the mutex held as before).
class Lockable {
 public:
  explicit Lockable(Mutex* mu) : mu_(mu) {}
  void lock() ABSL_NO_THREAD_SAFETY_ANALYSIS { mu_->Lock(); }
  void unlock() ABSL_NO_THREAD_SAFETY_ANALYSIS { mu_->Unlock(); }

 private:
  Mutex* const mu_;
};

}  // namespace

class InProcessCommunicatorGroup::Rendezvous {
 public:
  Rendezvous(int world_size, std::chrono::milliseconds timeout)
      : world_size_(world_size),
        timeout_(timeout),
        inputs_(world_size),
        slots_(world_size),
        posted_(world_size, -1),
        finished_(world_size, -1) {}

  // Rank `rank`'s collective `n`, from its post to its departure.
  void Run(int rank, int64_t n, const Call& call) {
    // Safe outside the lock: the peers finished reading it at n - 1 (4).
    if (call.kind == Kind::kAllReduceSum) inputs_[rank].assign(call.data.begin(), call.data.end());
    std::vector<std::span<const std::byte>> pieces;
    {
      MutexLock lock(&mu_);
      if (failure_) Throw(rank, n, call, /*earlier=*/true);
      Arrive(rank, n, call);
      AwaitReady(rank, n, call);
      if (call.kind == Kind::kAllToAllV) pieces = PiecesFor(rank);
    }
    Exchange(rank, call, pieces);
    MutexLock lock(&mu_);
    Depart(rank, n);
  }

  // Breaks the group: rank `rank` failed its own checks at collective `n`,
  // or gave up (Communicator::Break).
  // Returns false when the group had failed already.
  bool Abort(int rank, int64_t n, std::string_view error) {
    MutexLock lock(&mu_);
    if (failure_) return false;
    failure_ = Failure{.unavailable = false,
                       .where = fmt::format("collective #{}", n),
                       .problem = fmt::format("rank {} broke the group: {}", rank, error)};
    changed_.notify_all();
    return true;
  }

 private:
  struct Failure {
    bool unavailable = false;  // else InvalidArgument
    std::string where;         // "collective #3", with its call where all ranks agree on it
    std::string problem;
  };

  void Arrive(int rank, int64_t n, const Call& call) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    slots_[rank] = call;
    posted_[rank] = n;
    if (!std::all_of(posted_.begin(), posted_.end(), [n](int64_t p) { return p == n; })) return;
    const std::string where = fmt::format("collective #{}", n);
    if (std::string problem = CallMismatch(); !problem.empty()) {
      failure_ = Failure{.unavailable = false, .where = where, .problem = problem};
    } else if (problem = SizeMismatch(); !problem.empty()) {
      failure_ = Failure{.where = fmt::format("{} {}", where, Describe(call)), .problem = problem};
    } else {
      ready_ = n;
    }
    changed_.notify_all();
  }

  // The first rank that called another collective than rank 0, or "".
  std::string CallMismatch() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const Call& first = slots_[0];
    for (int p = 1; p < world_size_; ++p) {
      if (slots_[p].kind != first.kind || slots_[p].what != first.what) {
        return fmt::format("rank {} called {} but rank 0 called {}", p, Describe(slots_[p]),
                           Describe(first));
      }
    }
    return "";
  }

  // The first size or count on which the ranks of one collective disagree,
  // or "".
  std::string SizeMismatch() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const Call& first = slots_[0];
    for (int p = 1; p < world_size_ && first.kind == Kind::kAllReduceSum; ++p) {
      if (slots_[p].data.size() != first.data.size()) {
        return fmt::format("rank {} has {} floats but rank 0 has {}", p, slots_[p].data.size(),
                           first.data.size());
      }
    }
    for (int s = 0; s < world_size_ && first.kind == Kind::kAllToAllV; ++s) {
      for (int d = 0; d < world_size_; ++d) {
        const int64_t sent = slots_[s].send_bytes[d];
        const int64_t expected = slots_[d].recv_bytes[s];
        if (sent != expected) {
          return fmt::format("rank {} sends {} bytes to rank {}, but rank {} expects {} bytes", s,
                             sent, d, d, expected);
        }
      }
    }
    return "";
  }

  void AwaitReady(int rank, int64_t n, const Call& call) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const Clock::time_point deadline = Clock::now() + timeout_;
    Lockable lockable(&mu_);
    while (ready_ < n && !failure_) {
      if (changed_.wait_until(lockable, deadline) == std::cv_status::no_timeout) continue;
      if (ready_ >= n || failure_) break;
      failure_ = Failure{.unavailable = true,
                         .where = fmt::format("collective #{} {}", n, Describe(call)),
                         .problem = fmt::format("rank {} waited {} ms but {}", rank,
                                                timeout_.count(), Missing(n))};
      changed_.notify_all();
    }
    if (ready_ < n) Throw(rank, n, call, /*earlier=*/false);
  }

  // "rank 2 never arrived", "ranks 2, 3 never arrived".
  std::string Missing(int64_t n) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<int> missing;
    for (int p = 0; p < world_size_; ++p) {
      if (posted_[p] < n) missing.push_back(p);
    }
    return fmt::format("{} {} never arrived", missing.size() == 1 ? "rank" : "ranks",
                       absl::StrJoin(missing, ", "));
  }

  // The pieces of the peers' send buffers that rank `rank` receives, in
  // rank order.
  std::vector<std::span<const std::byte>> PiecesFor(int rank) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<std::span<const std::byte>> pieces;
    for (const Call& peer : slots_) {
      int64_t offset = 0;
      for (int q = 0; q < rank; ++q) offset += peer.send_bytes[q];
      pieces.push_back(peer.send.subspan(offset, peer.send_bytes[rank]));
    }
    return pieces;
  }

  // Outside the lock, by (3).
  void Exchange(int rank, const Call& call, std::span<const std::span<const std::byte>> pieces) {
    if (call.kind == Kind::kAllToAllV) {
      std::byte* out = call.recv.data();
      for (std::span<const std::byte> piece : pieces) {
        if (!piece.empty()) std::memcpy(out, piece.data(), piece.size());
        out += piece.size();
      }
    } else if (call.kind == Kind::kAllReduceSum) {
      // Element i is ((x0[i] + x1[i]) + x2[i]) + ... on every rank.
      std::copy(inputs_[0].begin(), inputs_[0].end(), call.data.begin());
      for (int p = 1; p < world_size_; ++p) {
        const std::vector<float>& input = inputs_[p];
        for (size_t i = 0; i < call.data.size(); ++i) call.data[i] += input[i];
      }
    }
  }

  void Depart(int rank, int64_t n) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    finished_[rank] = n;
    if (AllFinished(n)) {
      changed_.notify_all();
      return;
    }
    Lockable lockable(&mu_);
    while (!AllFinished(n)) changed_.wait(lockable);
  }

  bool AllFinished(int64_t n) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return std::all_of(finished_.begin(), finished_.end(), [n](int64_t f) { return f >= n; });
  }

  // Throws failure_ on rank `rank` at collective `n`; `earlier` when it
  // happened at an earlier collective, which the message then names.
  [[noreturn]] void Throw(int rank, int64_t n, const Call& call, bool earlier) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const std::string message = fmt::format(
        "[Communicator::{}] rank {}: collective #{} '{}': {}{}", KindName(call.kind), rank, n,
        call.what, earlier ? fmt::format("the group failed at {}: ", failure_->where) : "",
        failure_->problem);
    if (failure_->unavailable) throw Unavailable(message);
    throw InvalidArgument(message);
  }

  const int world_size_;
  const std::chrono::milliseconds timeout_;
  // Rank r's AllReduceSum input: written by rank r alone before it posts,
  // read by every rank in the exchange (3, 4).
  std::vector<std::vector<float>> inputs_;

  Mutex mu_;
  std::condition_variable_any changed_;  // a post, a departure or a failure
  std::vector<Call> slots_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> posted_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> finished_ ABSL_GUARDED_BY(mu_);
  int64_t ready_ ABSL_GUARDED_BY(mu_) = -1;
  std::optional<Failure> failure_ ABSL_GUARDED_BY(mu_);
};

class InProcessCommunicatorGroup::Rank : public Communicator {
 public:
  Rank(int rank, int world_size, Rendezvous& rendezvous)
      : Communicator(rank, world_size), rendezvous_(rendezvous) {}

 protected:
  void DoAllToAllV(std::span<const std::byte> send, std::span<const int64_t> send_bytes,
                   std::span<std::byte> recv, std::span<const int64_t> recv_bytes,
                   std::string_view what) override {
    rendezvous_.Run(rank(), calls_++,
                    Call{.kind = Kind::kAllToAllV,
                         .what = std::string(what),
                         .send = send,
                         .send_bytes = send_bytes,
                         .recv = recv,
                         .recv_bytes = recv_bytes});
  }
  void DoAllReduceSum(std::span<float> data, std::string_view what) override {
    rendezvous_.Run(rank(), calls_++,
                    Call{.kind = Kind::kAllReduceSum, .what = std::string(what), .data = data});
  }
  void DoBarrier(std::string_view what) override {
    rendezvous_.Run(rank(), calls_++, Call{.kind = Kind::kBarrier, .what = std::string(what)});
  }
  bool Abort(std::string_view error) noexcept override {
    return rendezvous_.Abort(rank(), calls_++, error);
  }

 private:
  Rendezvous& rendezvous_;
  int64_t calls_ = 0;  // the collectives this rank began; its one thread's alone
};

InProcessCommunicatorGroup::InProcessCommunicatorGroup(
    int world_size, const InProcessCommunicatorOptions& options) {
  if (world_size < 1) {
    throw InvalidArgument(
        fmt::format("[InProcessCommunicatorGroup] world_size is {}, not >= 1", world_size));
  }
  if (options.timeout.count() <= 0) {
    throw InvalidArgument(fmt::format("[InProcessCommunicatorGroup] timeout is {} ms, not > 0",
                                      options.timeout.count()));
  }
  rendezvous_ = std::make_unique<Rendezvous>(world_size, options.timeout);
  for (int r = 0; r < world_size; ++r) {
    ranks_.push_back(std::make_unique<Rank>(r, world_size, *rendezvous_));
  }
}

InProcessCommunicatorGroup::~InProcessCommunicatorGroup() = default;

Communicator& InProcessCommunicatorGroup::communicator(int rank) {
  if (rank < 0 || rank >= world_size()) {
    throw InvalidArgument(fmt::format(
        "[InProcessCommunicatorGroup::communicator] rank {} of world_size {}", rank, world_size()));
  }
  return *ranks_[rank];
}

}  // namespace ember::train
