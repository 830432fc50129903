#include "tools/train/dist/rank_threads.h"

#include <exception>
#include <thread>
#include <vector>

namespace ember::train {

void RunOnRankThreads(int ranks, const std::function<void(int)>& body,
                      const std::function<void(int)>& on_failure) {
  std::vector<std::exception_ptr> errors(ranks);
  std::vector<std::thread> threads;
  threads.reserve(ranks);
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (...) {
        errors[r] = std::current_exception();
        if (on_failure) on_failure(r);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace ember::train
