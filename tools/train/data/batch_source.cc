#include "tools/train/data/batch_source.h"

#include <cstdint>

#include <absl/strings/str_cat.h>

#include "engine/error.h"

namespace ember::train {

BatchSource::BatchSource(int64_t batch_size) : batch_size_(batch_size) {
  if (batch_size <= 0) {
    throw InvalidArgument(
        absl::StrCat("[BatchSource] batch size ", batch_size, " is not positive"));
  }
}

}  // namespace ember::train
