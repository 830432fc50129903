#pragma once

// ConvertCriteoText: Criteo TSV files (criteo_line.h) into one file of the
// binary format (criteo_binary_format.h), hashed for the model's tables.
// The text is read as CriteoTextSource reads it (same transform, same
// errors, with "[ConvertCriteoText]" in front), so the binary file's
// batches equal the text's. `output` appears only when the conversion has
// succeeded (written to output + ".tmp", then renamed).
//
// Thread safety: thread-safe (no shared state); blocks on I/O.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ember::train {

struct ConvertProgress {
  int64_t examples = 0;       // written so far
  int64_t skipped_lines = 0;  // bad lines skipped so far
  int64_t bytes_read = 0;     // of the input
  int64_t bytes_total = 0;    // of the input (the files' sizes at the start)
};

struct ConvertOptions {
  std::vector<int64_t> rows = {};  // the model's 26 table sizes
  bool skip_bad_lines = false;
  // Called every progress_every examples and once at the end, on the
  // calling thread.
  std::function<void(const ConvertProgress&)> progress = {};
  int64_t progress_every = int64_t{1} << 20;
};

// Converts `inputs`, in order, into `output`; returns the final progress.
// Throws InvalidArgument for a bad line (naming file, line and field; not
// with skip_bad_lines) or an input that cannot be read, and Error for an
// output that cannot be written; `output` is then left as it was.
ConvertProgress ConvertCriteoText(const std::vector<std::string>& inputs, const std::string& output,
                                  const ConvertOptions& options);

}  // namespace ember::train
