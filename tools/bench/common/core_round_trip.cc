#include "tools/bench/common/core_round_trip.h"

#include <atomic>
#include <chrono>
#include <thread>

namespace ember::bench {

double CoreRoundTripNs(int trips) {
  // The caller writes odd values, the echo thread the next even one: each
  // side spins until the line comes back with the other's write.
  alignas(64) std::atomic<int> line{0};
  std::thread echo([&line, trips] {
    for (int i = 0; i < trips; ++i) {
      while (line.load(std::memory_order_acquire) != 2 * i + 1) {
      }
      line.store(2 * i + 2, std::memory_order_release);
    }
  });
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < trips; ++i) {
    line.store(2 * i + 1, std::memory_order_release);
    while (line.load(std::memory_order_acquire) != 2 * i + 2) {
    }
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  echo.join();
  return std::chrono::duration<double, std::nano>(elapsed).count() / trips;
}

}  // namespace ember::bench
