// GpuCount and CudaLoadsKernelsLazily in a build without CUDA (see device.h).

#include "engine/base/device.h"

namespace ember {

int GpuCount() { return 0; }

bool CudaLoadsKernelsLazily() { return false; }

}  // namespace ember
