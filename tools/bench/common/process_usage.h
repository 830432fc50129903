#pragma once

// ProcessUsage: what getrusage says this process (every thread of it) has
// used so far: CPU time in user and kernel mode, and context switches. The
// difference of two snapshots is what the code between them cost beyond its
// wall time; sleep/wake churn of worker threads shows as voluntary switches
// (a thread blocked) and system time (futex calls, wake-ups).
//
// Thread safety: thread-safe.

namespace ember::bench {

struct ProcessUsage {
  double user_s = 0;
  double sys_s = 0;
  double voluntary_switches = 0;
  double involuntary_switches = 0;

  // RUSAGE_SELF: this process, all its threads, not its children.
  [[nodiscard]] static ProcessUsage Now();

  [[nodiscard]] double cpu_s() const { return user_s + sys_s; }
  [[nodiscard]] ProcessUsage operator-(const ProcessUsage& earlier) const;
};

// CPU seconds of this process and of its children that have been waited
// for (RUSAGE_SELF + RUSAGE_CHILDREN), user and system.
[[nodiscard]] double OwnAndChildrenCpuSeconds();

}  // namespace ember::bench
