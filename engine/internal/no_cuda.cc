// The GPU backend of a build without CUDA: there is none, and GPU contexts
// are refused at push time (see Executor::CheckContext).

#include "engine/internal/gpu_backend.h"

namespace ember::engine::internal {

std::unique_ptr<GpuBackend> MakeGpuBackend(const EngineOptions& /*options*/) { return nullptr; }

}  // namespace ember::engine::internal
