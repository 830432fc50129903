#pragma once

// What every op's push function does: check its tensors (dtype, shape, one
// engine, one context) with errors that name the op and the argument, and
// push the kernel as an engine op that reads and writes exactly the
// tensors' vars.
//
// Thread safety: thread-safe.

#include <functional>
#include <initializer_list>
#include <string_view>
#include <vector>

#include "engine/context.h"
#include "engine/engine.h"
#include "storage/dtype.h"
#include "storage/tensor.h"

namespace ember::ops::internal {

using storage::DType;
using storage::Tensor;

// Throws InvalidArgument "[op] `arg` ..." unless `tensor` is non-empty and
// has `dtype` (one of `dtypes`).
void CheckDType(std::string_view op, std::string_view arg, const Tensor& tensor, DType dtype);
void CheckDType(std::string_view op, std::string_view arg, const Tensor& tensor,
                std::initializer_list<DType> dtypes);
// ... unless `tensor` has exactly `shape`.
void CheckShape(std::string_view op, std::string_view arg, const Tensor& tensor,
                const std::vector<int64_t>& shape);
// The same for a braced shape, compared without building a vector (a push
// or a host check should not allocate when its arguments are good).
void CheckShape(std::string_view op, std::string_view arg, const Tensor& tensor,
                std::initializer_list<int64_t> shape);
// ... unless `tensor` has `numel` elements.
void CheckNumel(std::string_view op, std::string_view arg, const Tensor& tensor, int64_t numel);
// ... unless every tensor is non-empty, of one engine and on one context;
// returns that context. Null entries are skipped.
engine::Context CheckSamePlace(std::string_view op, std::initializer_list<const Tensor*> tensors);

// What every CUDA entry point of a build without CUDA does (the *_no_cuda.cc
// files): throws Unavailable naming `op`. No GPU tensor can exist there, so
// only a bug or a misuse gets here.
[[noreturn]] void ThrowNoCuda(std::string_view op);

// The kernel of an op: runs on the op's worker with the op's stream (null
// on the CPU). A throw is the op's error.
using Kernel = std::function<void(void* stream)>;

// Pushes `kernel` as a kNormal op named `op` on `ctx`, reading `reads` and
// writing `writes` (null entries skipped), on the tensors' engine. A GPU
// kernel launches on the stream and returns (the engine tracks its
// completion); a CPU kernel runs to completion.
void PushKernel(std::string_view op, engine::Context ctx,
                std::initializer_list<const Tensor*> reads,
                std::initializer_list<const Tensor*> writes, Kernel kernel);

// The kernel of an op whose GPU errors are known only once its GPU work is
// done (a verdict the kernels leave in memory): it launches and returns the
// check that reads the verdict, which the engine runs later on the host
// (engine.h, OnComplete::WithCheck), or an empty check when there is
// nothing to check (always on the CPU, where a throw is the op's error).
using CheckedKernel = std::function<engine::DeferredCheck(void* stream)>;

// PushKernel for a CheckedKernel: the op completes right after the launch
// and leaves its check to the engine, so that no worker waits for the GPU.
// `prop` picks the engine's pool that runs it (engine/context.h).
void PushCheckedKernel(std::string_view op, engine::Context ctx,
                       std::initializer_list<const Tensor*> reads,
                       std::initializer_list<const Tensor*> writes, CheckedKernel kernel,
                       engine::FnProperty prop = engine::FnProperty::kNormal);

// The shape as "[2, 3]", for messages.
std::string ShapeString(const std::vector<int64_t>& shape);

}  // namespace ember::ops::internal
