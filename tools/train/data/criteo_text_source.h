#pragma once

// CriteoTextSource: batches from Criteo's TSV click logs (criteo_line.h
// gives the layout and DLRM's transform), read in order from a list of
// files (a held-out set is another file). Every bag holds one index.
//
// Errors: a bad line is an InvalidArgument naming the file, the line and
// the field ("[CriteoTextSource] day_0.tsv:1234: field 15 ('zz12'): not a
// hexadecimal number"); the batch it falls in is not delivered, and Next
// throws the same error again until a Seek. With skip_bad_lines, bad lines
// are skipped and counted instead (skipped_lines(), logged at the end).
//
// Positions count good examples. size() is unknown (nullopt): a text file
// says how many examples it holds only once it has been read. Seek(p)
// reads forward from the current position, or from the start when p is
// behind it: O(p) parsing, unlike the binary source's O(1).
//
// Thread safety: one thread at a time.

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "tools/train/data/batch_source.h"
#include "tools/train/data/criteo_line.h"
#include "tools/train/data/criteo_text_reader.h"

namespace ember::train {

struct CriteoTextOptions {
  int64_t batch_size = 2048;
  std::vector<std::string> paths = {};  // read one after the other
  std::vector<int64_t> rows = {};       // the model's 26 table sizes: values hash into them
  bool skip_bad_lines = false;
};

class CriteoTextSource final : public BatchSource {
 public:
  // Opens nothing yet (the first Next does). Throws InvalidArgument for no
  // paths or rows that are not 26 positive sizes.
  explicit CriteoTextSource(const CriteoTextOptions& options);

  [[nodiscard]] const DataSpec& spec() const override { return spec_; }
  [[nodiscard]] int64_t position() const override { return position_; }
  [[nodiscard]] std::optional<int64_t> size() const override { return std::nullopt; }
  [[nodiscard]] std::optional<HostBatch> Next(const BatchMemory& memory) override;
  // Throws InvalidArgument when the files end before `example`, or for a
  // bad line on the way (as Next).
  void Seek(int64_t example) override;

  // Bad lines skipped to reach position() (with skip_bad_lines).
  [[nodiscard]] int64_t skipped_lines() const { return reader_.skipped_lines(); }

 private:
  // Reads up to `count` records into records_; throws as the reader.
  int64_t Read(int64_t count);

  const DataSpec spec_;
  CriteoTextReader reader_;
  int64_t position_ = 0;
  bool ended_ = false;                 // the end was reached (and logged)
  std::exception_ptr failed_;          // the bad data Next keeps throwing until Seek
  std::vector<CriteoRecord> records_;  // one batch's, reused
};

}  // namespace ember::train
