#pragma once

// BatchState: one batch in flight through the model: its tensors on the
// model's context, the cache locations of its rows, every activation and
// gradient of its step, and what the schedule has pushed for it so far.
//
// A pipeline holds a few of these in a ring (trainer.h) and reuses them:
// the engine orders a reuse after every op of the previous batch that
// touched the same tensors (their vars), so reuse never blocks the host.
// Activations are sized for one batch size and remade when a batch of
// another size (the last, short one) arrives.
//
// Thread safety: owned and pushed from by the training thread.

#include <cstdint>
#include <optional>

#include "cache/cached_tbe.h"
#include "storage/tensor.h"
#include "tools/train/mlp.h"

namespace ember::train {

struct BatchState {
  // Where the batch stands in the run: its step (from 0), its examples,
  // and the data position after it (HostBatch::position).
  int64_t step = -1;
  int64_t examples = 0;
  int64_t position = 0;

  // What the schedule pushed ahead for this batch (schedule.h): its
  // prefetch, and its embedding forward (the two make its "lookup").
  bool prefetched = false;
  bool embedded = false;

  // The batch on the model's context (DlrmModel::Upload).
  Tensor dense;                                    // [B, num_dense]
  Tensor indices;                                  // i64 [n]
  Tensor offsets;                                  // i64 [T * B + 1]
  Tensor labels;                                   // [B, 1]
  std::optional<cache::CacheLocations> locations;  // grown to the largest n seen

  // Activations and gradients for `batch` examples (DlrmModel makes them).
  int64_t batch = -1;
  Mlp::Activations bottom;
  Mlp::Activations top;
  Tensor pooled;       // [B, T*D]: the TBE's output
  Tensor inter_in;     // [B, T+1, D]: [z, pooled]
  Tensor inter_out;    // [B, pairs]
  Tensor top_in;       // [B, D + pairs]: [z, dots]
  Tensor loss;         // [1]
  Tensor grad_logits;  // [B, 1]
  Tensor d_top_in;     // [B, D + pairs]
  Tensor d_z;          // [B, D]: the bottom output's gradient (two parts, summed)
  Tensor d_z_inter;    // [B, D]: its part through the interaction
  Tensor d_inter_out;  // [B, pairs]
  Tensor d_inter_in;   // [B, T+1, D]
  Tensor d_pooled;     // [B, T*D]: the TBE's gradient
  Tensor probs;        // [B, 1]: evaluation's click probabilities

  // On the host (a copy on a GPU model; the loss itself on the CPU): what
  // the step's end marker reads (trainer.h) and evaluation collects.
  Tensor host_loss;   // [1]
  Tensor host_probs;  // [B, 1]
  // Written by the step's end marker: waiting for it waits for the step.
  Tensor done;  // i64 [1]: the step number
};

}  // namespace ember::train
