#pragma once

// The PyTorch peer of ember-bench-ops, from the C++ side: for each shape the
// bench writes the batch (raw indices and offsets in the indices' dtype,
// native byte order) and a small spec.json into a temporary directory, runs
// `<python> <script> --spec DIR/spec.json` (tools/bench/ops/tbe_torch_peer.py)
// with its stdout read through popen (its stderr goes to the bench's), and
// parses the flat JSON lines it prints:
//
//   {"info": "torch 2.4.1, CUDA 12.4, NVIDIA H100 80GB HBM3"}
//   {"case": "forward", "ms": 1.23, "iters": 81, "repeat": 3, "runs": "1.22 1.23 1.25"}
//   {"case": "sgd_sparse", "error": "skipped: ..."}
//   {"error": "no torch: ...", "unavailable": true}
//
// A missing python or script, or a python without torch or CUDA, makes the
// peer unavailable: the bench says why and runs on without the PyTorch
// column. It never fails the bench.
//
// Thread safety: the bench's main thread only.

#include <cstdint>
#include <map>
#include <string>

#include "tools/bench/ops/ops_cases.h"

namespace ember::bench::ops_bench {

struct PeerRun {
  std::map<std::string, Timing> timings;      // by case
  std::map<std::string, std::string> errors;  // by case
};

class TorchPeer {
 public:
  // Makes the temporary directory when the peer is on (options.python not
  // empty) and the script is found.
  explicit TorchPeer(const OpsBenchOptions& options);
  ~TorchPeer();  // removes the directory
  TorchPeer(const TorchPeer&) = delete;
  TorchPeer& operator=(const TorchPeer&) = delete;

  // False once the peer is off or was found unavailable.
  [[nodiscard]] bool enabled() const { return enabled_; }
  // The peer's torch and device (its info line) or why it is off.
  [[nodiscard]] const std::string& status() const { return status_; }

  // Runs the peer on one shape; `indices` holds the shape's T*B*L indices
  // (int64 with options.index64, else int32) in host memory. Errors of the
  // peer's cases come back in the result; a peer that cannot run at all
  // turns enabled() off and says why in status().
  PeerRun Run(const OpsShape& shape, const void* indices);

 private:
  const OpsBenchOptions& options_;
  std::string script_;
  std::string dir_;
  bool enabled_ = false;
  std::string status_;
};

}  // namespace ember::bench::ops_bench
