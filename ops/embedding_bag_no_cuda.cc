// The TBE CUDA entry points in a build without CUDA: every one throws
// Unavailable, so that callers carry no #if (no GPU context can run here).

#include "ops/internal/embedding_bag_kernels.h"
#include "ops/internal/embedding_bag_upload.h"
#include "ops/internal/op_util.h"

namespace ember::ops::internal {
void TbeValidateCuda(const TbeArgs&, int, void*) { ThrowNoCuda("TbeValidateCuda"); }
void TbeForwardCuda(const TbeArgs&, int, void*) { ThrowNoCuda("TbeForwardCuda"); }
void TbeBackwardCuda(const TbeArgs&, int, void*) { ThrowNoCuda("TbeBackwardCuda"); }
void TbeUploadCuda(const int64_t*, int64_t, int64_t*, int, void*) { ThrowNoCuda("TbeUploadCuda"); }

}  // namespace ember::ops::internal
