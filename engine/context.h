#pragma once

// Where an op runs (Context), how the engine treats it (FnProperty), and what
// the op is told when it runs (RunContext).
//
// Thread safety: plain values.

#include <cstdint>
#include <string>
#include <string_view>

namespace ember::engine {

// Context: an execution place, the CPU or one GPU.
struct Context {
  enum class Kind : uint8_t { kCPU, kGPU };

  Kind kind = Kind::kCPU;
  int device_id = 0;

  static constexpr Context CPU() { return {Kind::kCPU, 0}; }
  static constexpr Context GPU(int id) { return {Kind::kGPU, id}; }

  [[nodiscard]] constexpr bool is_gpu() const { return kind == Kind::kGPU; }
  [[nodiscard]] std::string ToString() const;  // "cpu" or "gpu(3)"
  friend constexpr bool operator==(Context, Context) = default;
};

// FnProperty: how the engine schedules an op.
enum class FnProperty : uint8_t {
  kNormal,          // a worker of the op's context
  kCopyToGPU,       // copy into a GPU: that GPU's copy-in workers
  kCopyFromGPU,     // copy out of a GPU: that GPU's copy-out workers
  kCPUPrioritized,  // the CPU priority workers, highest priority first
  kGPUPrioritized,  // the GPU priority workers, highest priority first
  kAsync,           // must not block: runs on the thread that makes it ready
  kDeleteVar,       // the engine's own var deletions (Engine::DeleteVariable); pushes refuse it
  kNoSkip,          // runs even when an input carries an error
};

// Name of a property, e.g. "CPUPrioritized", for messages and traces.
std::string_view ToString(FnProperty prop);

// RunContext: what a running op is handed. `stream` is the op's CUDA stream
// (a cudaStream_t) for GPU contexts and null on the CPU; it stays opaque here
// so that this header does not depend on CUDA.
struct RunContext {
  Context ctx;
  void* stream = nullptr;
  std::string_view op_name;  // valid while the op runs
  // A kNoSkip op runs although an input carries an error; this says so,
  // so that it can act on it (a collective breaks its group instead of
  // sending what the failed op left in its input). Its outputs carry the
  // input's error whatever it does. False for every other op.
  bool input_failed = false;
};

}  // namespace ember::engine
