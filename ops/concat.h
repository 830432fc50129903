#pragma once

// Column concatenation and its inverse, for DLRM's feature assembly: the
// bottom MLP's output [B, D] beside the pooled embeddings [B, T*D] is the
// interaction's input [B, T+1, D]; the bottom output beside the interaction
// output is the top MLP's input. The split is the matching backward: it
// cuts a gradient back into its parts.
//
// Layout. Every tensor is read as B rows (its first dimension) of numel / B
// columns, row-major, so a [B, F, D] tensor is B rows of F * D columns and
// a [B] tensor B rows of one column. Parts are laid side by side in the
// order given:
//   whole[b, offset_k + j] = part_k[b, j],  offset_k = sum of the widths
//   of the parts before k.
// At most kMaxConcatParts parts, at least one.
//
// Every tensor of one call is f32 and lives on one context of one engine
// (the CPU, or one GPU); the op runs there, kNormal. A pure copy: the CPU
// and the GPU give the same bits.
//
// Errors: InvalidArgument from the call, naming the op and the argument:
// a non-f32 or 0-dimensional tensor, a part whose rows differ from the
// whole's ("[ConcatColumns] `parts[1]` has 3 rows; `out` has 4"), widths
// that do not add up to the whole's, a whole that is also a part, too many
// or no parts, tensors on two contexts. A CUDA error is the op's error.
//
// Thread safety: the push functions are thread-safe (they push engine ops).
// The tensors must stay alive until the pushed op has run (a Tensor's
// deletion is deferred through the engine, so destroying it is safe).

#include <cstdint>
#include <initializer_list>

#include "storage/tensor.h"

namespace ember::ops {

using storage::Tensor;

inline constexpr int kMaxConcatParts = 4;

// out[b, :] = [parts[0][b, :], parts[1][b, :], ...]. Reads the parts;
// writes out (distinct from every part).
void ConcatColumns(std::initializer_list<const Tensor*> parts, Tensor& out);

// parts[k][b, :] = input[b, offset_k .. offset_k + width_k), the inverse
// of ConcatColumns. Reads input; writes every part (distinct from input and
// from each other).
void SplitColumns(const Tensor& input, std::initializer_list<Tensor*> parts);

// out = input's rows [first_row, first_row + out's rows): a slice of the
// batch, e.g. one data-parallel rank's examples of a whole batch (rows and
// columns as above; out's columns are input's). Reads input; writes out
// (distinct from input). InvalidArgument also for rows outside input.
void SliceRows(const Tensor& input, int64_t first_row, Tensor& out);

}  // namespace ember::ops
