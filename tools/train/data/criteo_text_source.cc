#include "tools/train/data/criteo_text_source.h"

#include <cstdint>
#include <cstring>
#include <exception>
#include <optional>
#include <utility>

#include <absl/strings/str_cat.h>

#include "engine/base/logging.h"
#include "engine/error.h"
#include "tools/train/data/batch_builder.h"
#include "tools/train/data/record_batch.h"

namespace ember::train {

CriteoTextSource::CriteoTextSource(const CriteoTextOptions& options)
    : BatchSource(options.batch_size),
      spec_{.num_dense = kCriteoNumDense, .rows = options.rows},
      reader_(options.paths, options.rows, options.skip_bad_lines, "CriteoTextSource") {}

int64_t CriteoTextSource::Read(int64_t count) {
  records_.resize(static_cast<size_t>(count));
  int64_t got = 0;
  while (got < count && reader_.Next(&records_[static_cast<size_t>(got)])) ++got;
  if (got < count && !ended_) {
    ended_ = true;
    if (reader_.skipped_lines() > 0) {
      Log().warn("[CriteoTextSource] skipped {} bad lines of {}; read {} examples",
                 reader_.skipped_lines(), reader_.skipped_lines() + reader_.records(),
                 reader_.records());
    }
  }
  return got;
}

std::optional<HostBatch> CriteoTextSource::Next(const BatchMemory& memory) {
  if (failed_) std::rethrow_exception(failed_);
  int64_t count = 0;
  try {
    count = Read(batch_size());
  } catch (const InvalidArgument&) {
    failed_ = std::current_exception();
    throw;
  }
  if (count == 0) return std::nullopt;
  BatchBuilder builder(memory, count, spec_.num_dense, spec_.num_tables());
  StartRecordBatch(builder);
  // The parser made every value a row below rows[t]: no fault to find.
  (void)CopyRecords(builder, 0, reinterpret_cast<const std::byte*>(records_.data()), count, spec_);
  position_ += count;
  return std::move(builder).Finish(position_);
}

void CriteoTextSource::Seek(int64_t example) {
  if (example < 0) {
    throw InvalidArgument(
        absl::StrCat("[CriteoTextSource::Seek] example ", example, " is negative"));
  }
  if (example < position_ || failed_) {
    reader_.Rewind();
    position_ = 0;
    ended_ = false;
    failed_ = nullptr;
  }
  CriteoRecord scratch;
  while (position_ < example) {
    bool more = false;
    try {
      more = reader_.Next(&scratch);
    } catch (const InvalidArgument&) {
      failed_ = std::current_exception();
      throw;
    }
    if (!more) {
      throw InvalidArgument(absl::StrCat("[CriteoTextSource::Seek] example ", example,
                                         " is past the end: the files hold ", position_,
                                         " examples"));
    }
    ++position_;
  }
}

}  // namespace ember::train
