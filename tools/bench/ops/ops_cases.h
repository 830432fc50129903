#pragma once

// The cases of ember-bench-ops: Ember's table-batched embedding bags (TBE,
// ops/embedding_bag.h) at DLRM-like shapes, beside the GPU's random-row
// gather bandwidth measured in the same run and PyTorch's nn.EmbeddingBag
// and torch.optim on the same shapes and indices (tbe_torch_peer.py, run
// as a child process).
//
// Per shape (T tables of --rows rows, D columns, f32 weights, B bags of L
// lookups per table, sum pooling, i32 or i64 indices drawn from Zipf(--zipf)
// over each table's rows, gather_kernel.h):
//
//   gather            the bench's own gather of the same rows (same indices,
//                     same weights): bytes of rows read / time
//   forward           EmbeddingBagForward, validate=false; also validate=true
//   sgd, adagrad      EmbeddingBagBackwardSgd / ...RowwiseAdagrad,
//                     validate=false, deterministic false and true
//   PyTorch           forward (no_grad, and with autograd), backward +
//                     SGD / Adagrad step with sparse and with dense grads
//
// Ember ops run on an engine of --engine (ThreadedEnginePerDeviceAsync),
// each case timed on the host around WaitForAll() of `iters` pushes of one
// iteration (every iteration writes `out`, or the weights, so they run one
// after another); the gather with CUDA events on the bench's stream. Each
// case: --warmup iterations, one more timed to pick `iters` (about
// --time_ms of work, within [--min_iters, --max_iters]), then --repeat
// timed runs; the figure is the median run's ms per iteration.
//
// Bytes (GB/s = bytes / time, 1 GB = 1e9 bytes), N = T*B*L lookups, U the
// distinct (table, row) pairs of the batch, I the bytes of an index:
//   gather    N*D*4
//   forward   N*D*4 + B*T*D*4 + (N + T*B + 1)*I
//   sgd       N*D*4 + 2*U*D*4 + (N + T*B + 1)*I
//   adagrad   sgd + 2*U*4
// PyTorch's GB/s divide the same bytes by PyTorch's time.
//
// A build without CUDA links ops_cases_stub.cc, whose RunOpsCases only says
// so.
//
// Thread safety: the bench's main thread only.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tools/bench/common/table.h"

namespace ember::bench {

struct OpsShape {
  int tables = 0;     // T
  int pooling = 0;    // L
  int64_t batch = 0;  // B
};

struct OpsBenchOptions {
  std::vector<OpsShape> shapes;
  int64_t rows = 1'000'000;  // per table
  int dim = 128;             // D
  double zipf = 1.05;        // alpha; 0: uniform
  bool index64 = false;
  uint64_t seed = 1;
  std::string engine = "ThreadedEnginePerDeviceAsync";
  double time_ms = 100;
  int warmup = 2;
  int min_iters = 3;
  int max_iters = 200;
  int repeat = 3;
  bool deterministic = true;  // also run the deterministic backward
  bool validate = true;       // also run the forward with validate=true
  // The PyTorch peer; an empty python turns it off.
  std::string python = "python3";
  std::string torch_peer;  // the script
  std::string tmp_dir;     // where each shape's indices go for the peer
};

// One measured figure: ms per iteration of the median run, every run's,
// and the iterations per run.
struct Timing {
  double ms = 0;
  std::vector<double> runs;
  int iters = 0;
};

struct ShapeResult {
  OpsShape shape;
  int64_t lookups = 0;        // N
  int64_t distinct_rows = 0;  // U
  int gather_unroll = 0;
  // Bytes of each case (ops_cases.h); PyTorch's cases use the same.
  double gather_bytes = 0;
  double forward_bytes = 0;
  double sgd_bytes = 0;
  double adagrad_bytes = 0;
  // Ember's cases: gather, forward, forward_validate, sgd, sgd_det, adagrad,
  // adagrad_det. PyTorch's (the peer's names): forward, forward_autograd,
  // sgd_sparse, sgd_dense, adagrad_sparse, adagrad_dense.
  std::map<std::string, Timing> ember;
  std::map<std::string, Timing> torch;
  std::map<std::string, std::string> errors;  // "ember:<case>" or "torch:<case>": why not run
  bool forward_checked = false;               // sampled bags matched a host sum
  std::string skipped;                        // why the shape did not run at all
};

struct OpsCasesResult {
  std::vector<ShapeResult> shapes;
  std::vector<Table> tables;  // a table per shape, then the targets' table
  std::vector<std::string> notes;
  std::string device;         // the device, or empty when nothing ran
  std::string skipped;        // why nothing ran, or empty
  std::string torch_info;     // the peer's torch and device, or why it did not run
  bool ember_failed = false;  // an Ember case failed or computed a wrong sum
};

// Runs every shape and builds the tables. Without a GPU, or in a build
// without CUDA, runs nothing and says why in `skipped`. Progress goes to
// stderr. Throws CudaError (naming the call) for a failed CUDA call of the
// bench's own; an Ember op's error is recorded in `errors` instead.
OpsCasesResult RunOpsCases(const OpsBenchOptions& options);

// The tables of `result` (ops_table.cc): one per shape, and the targets
// (worst shape) at the end.
void BuildOpsTables(const OpsBenchOptions& options, OpsCasesResult* result);

}  // namespace ember::bench
