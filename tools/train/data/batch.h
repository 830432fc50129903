#pragma once

// HostBatch: one batch of a click log on the host, what a data source makes
// and the training step copies to its device: dense features, sparse
// features in the TBE layout of ops/embedding_bag.h, and labels.
//
// The tensors live on the CPU context, in pinned memory when the process
// has a GPU (so that the host-to-device copy is a DMA the copy workers
// overlap with compute) and in plain host memory otherwise.
//
// Thread safety: a value, moved between threads (the loader thread makes
// it, the training thread consumes it).

#include <cstdint>

#include "storage/tensor.h"

namespace ember::train {

struct HostBatch {
  int64_t batch_size = 0;   // B: examples in this batch (the last may be smaller)
  storage::Tensor dense;    // f32 [B, num_dense]
  storage::Tensor indices;  // i64 [n]: every table's indices, table after table
  storage::Tensor offsets;  // i64 [T * B + 1]: bag b of table t is
                            // indices[offsets[t*B + b] .. offsets[t*B + b + 1])
  storage::Tensor labels;   // f32 [B], 0 or 1
  // Where the source stands after this batch (examples consumed so far):
  // what a checkpoint records to resume the data exactly here.
  int64_t position = 0;
};

}  // namespace ember::train
