// GpuCount in a build without CUDA (see device.h).

#include "engine/base/device.h"

namespace ember {

int GpuCount() { return 0; }

}  // namespace ember
