#pragma once

// The TBE with rows held in cache slots (TbeCachedRows), against the TBE
// reading every row at home, on one context: the same random batch, a
// random set of rows copied into random slots (their home rows then
// overwritten with garbage, so that a read of a cached row from home
// shows), forward and backward with each optimizer. Bit for bit: the same
// values are summed in the same order; and the backward flags dirty exactly
// the slots it updates. Used by the CPU and the CUDA tests.

#include <string>

#include "engine/context.h"
#include "storage/dtype.h"

namespace ember::ops::testing {

enum class CachedOptimizer { kSgd, kRowwiseAdagrad, kAdam };

// Runs the comparison on `ctx` with engine `engine_name`; records gtest
// failures.
void CheckCachedRowsMatchHomeRows(const std::string& engine_name, engine::Context ctx,
                                  storage::DType dtype, CachedOptimizer optimizer, uint64_t seed);

}  // namespace ember::ops::testing
