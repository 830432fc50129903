// main() of the engine tests: GoogleTest plus a deadline per test, so that a
// deadlock fails with the test's name instead of hanging until ctest's
// timeout. EMBER_TEST_DEADLINE_S overrides the default of 120 s (sanitizer
// builds run slower).

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace {

// The watchdog's state, shared with its thread. Leaked on purpose: the
// thread is detached (it must never block exit) and may still read it while
// GoogleTest deletes its listeners at exit.
class Watchdog {
 public:
  explicit Watchdog(std::chrono::seconds limit) : limit_(limit) {
    std::thread([this] { Watch(); }).detach();
  }

  void Arm(std::string name) {
    std::lock_guard<std::mutex> lock(mu_);
    name_ = std::move(name);
    deadline_ = std::chrono::steady_clock::now() + limit_;
    armed_ = true;
    cv_.notify_all();
  }
  void Disarm() {
    std::lock_guard<std::mutex> lock(mu_);
    armed_ = false;
  }

 private:
  void Watch() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (!armed_) {
        cv_.wait(lock);
        continue;
      }
      if (std::chrono::steady_clock::now() >= deadline_) {
        std::fprintf(stderr, "\n%s exceeded its %llds deadline: deadlock or hang\n",
                     name_.c_str(), static_cast<long long>(limit_.count()));
        std::fflush(stderr);
        std::abort();
      }
      cv_.wait_until(lock, deadline_);
    }
  }

  const std::chrono::seconds limit_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string name_;
  std::chrono::steady_clock::time_point deadline_;
  bool armed_ = false;
};

class DeadlineListener : public ::testing::EmptyTestEventListener {
 public:
  explicit DeadlineListener(std::chrono::seconds limit) : watchdog_(new Watchdog(limit)) {}
  void OnTestStart(const ::testing::TestInfo& info) override {
    watchdog_->Arm(std::string(info.test_suite_name()) + "." + info.name());
  }
  void OnTestEnd(const ::testing::TestInfo&) override { watchdog_->Disarm(); }

 private:
  Watchdog* const watchdog_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const char* text = std::getenv("EMBER_TEST_DEADLINE_S");
  const int seconds = text != nullptr ? std::atoi(text) : 120;
  // Owned by GoogleTest's listener list from here on.
  ::testing::UnitTest::GetInstance()->listeners().Append(
      new DeadlineListener(std::chrono::seconds(seconds)));
  return RUN_ALL_TESTS();
}
