#pragma once

// CriteoBinarySource: batches from files in the binary format
// (criteo_binary_format.h) that ConvertCriteoText writes, read one after
// the other as one sequence (a held-out set is another file). Each file is
// memory-mapped and read sequentially; a batch is a copy out of the map
// (labels, dense rows, and each record's rows transposed into the
// table-major indices), so reading runs at memory speed.
//
// Every file is opened and its header checked at construction: a bad
// magic or version, a size other than the header promises (truncated, or
// trailing bytes), or tables other than the model's (naming what differs)
// is an InvalidArgument naming the file. A record that cannot be right (a
// label not 0 or 1, a row not below its table's size) is an
// InvalidArgument at the Next that reaches it, naming the file and record.
//
// size() is known, and Seek is O(1).
//
// Thread safety: one thread at a time.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tools/train/data/batch_source.h"

namespace ember::train {

struct CriteoBinaryOptions {
  int64_t batch_size = 2048;
  std::vector<std::string> paths = {};  // read one after the other
  // The model's shape: every file's header must match it (13 dense
  // features and 26 tables for Criteo; any counts the file declares work).
  DataSpec spec = {};
};

class CriteoBinarySource final : public BatchSource {
 public:
  // Maps every file and checks its header. Throws InvalidArgument as above,
  // and for no paths or a file that cannot be opened or mapped.
  explicit CriteoBinarySource(const CriteoBinaryOptions& options);
  ~CriteoBinarySource() override;

  [[nodiscard]] const DataSpec& spec() const override { return spec_; }
  [[nodiscard]] int64_t position() const override { return position_; }
  [[nodiscard]] std::optional<int64_t> size() const override { return total_; }
  [[nodiscard]] std::optional<HostBatch> Next(const BatchMemory& memory) override;
  void Seek(int64_t example) override;

 private:
  struct File;

  const DataSpec spec_;
  std::vector<std::unique_ptr<File>> files_;
  std::vector<int64_t> starts_;  // example number of each file's first record
  int64_t total_ = 0;
  int64_t position_ = 0;
};

}  // namespace ember::train
