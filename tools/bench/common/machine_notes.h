#pragma once

// What a bench's figures depend on besides the code: which CPU ran them,
// and how busy the machine was. On a shared 2-core VM a neighbour's compile
// shows in every figure, so each report says how much CPU other processes
// took while its runs went on (OtherProcessesMeter).
//
// Thread safety: thread-safe; an OtherProcessesMeter is used by one thread.

#include <chrono>
#include <string>
#include <string_view>

namespace ember::bench {

struct MachineInfo {
  std::string cpu_model;  // /proc/cpuinfo "model name"
  unsigned hardware_threads = 0;
  double load_average = 0;  // 1-minute, when read; NaN if unknown

  // Reads them now.
  [[nodiscard]] static MachineInfo Read();

  // "CPU: <model>, 2 hardware threads, load average 0.16 at start".
  [[nodiscard]] std::string Note() const;
  // {"cpu_model": ..., "hardware_threads": ..., "load_average": ...}.
  [[nodiscard]] std::string Json() const;
};

// The share of all CPUs that processes other than this one and its waited-
// for children used from construction to Share(): the machine's busy time
// (/proc/stat) less our own.
class OtherProcessesMeter {
 public:
  OtherProcessesMeter();

  // In [0, 1]; NaN when /proc/stat cannot be read.
  [[nodiscard]] double Share() const;

  // "other processes used 0.3% of the CPUs during the runs"; also warns on
  // stderr, as `who`, above 5%.
  [[nodiscard]] std::string Note(std::string_view who) const;

 private:
  double machine_start_;
  double own_start_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace ember::bench
