// The TBE CUDA entry points in a build without CUDA: every one throws
// Unavailable, so that callers carry no #if (no GPU context can run here).

#include <string>

#include "engine/error.h"
#include "ops/internal/embedding_bag_kernels.h"
#include "ops/internal/embedding_bag_upload.h"

namespace ember::ops::internal {
namespace {

[[noreturn]] void NoCuda(const char* what) {
  throw Unavailable(std::string("[") + what + "] needs CUDA; this build has none");
}

}  // namespace

void TbeValidateCuda(const TbeArgs&, int, void*) { NoCuda("TbeValidateCuda"); }
void TbeForwardCuda(const TbeArgs&, int, void*) { NoCuda("TbeForwardCuda"); }
void TbeBackwardCuda(const TbeArgs&, int, void*) { NoCuda("TbeBackwardCuda"); }
void TbeUploadCuda(const int64_t*, int64_t, int64_t*, int, void*) { NoCuda("TbeUploadCuda"); }

}  // namespace ember::ops::internal
