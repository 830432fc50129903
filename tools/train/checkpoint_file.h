#pragma once

// The checkpoint file: a header (the model's shape, the step, the data
// position) and named arrays, written atomically and read back verified.
//
// Format (integers little-endian, as the host writes them):
//   "EMBRCKPT"  u32 version (1)  u64 header bytes  header text
//   u64 section count
//   sections, each:  u32 name bytes  name  u8 dtype  u32 rank
//                    i64 shape[rank]  u64 data bytes  data
//   "EMBR-END"  u64 checksum of every byte before it (checkpoint_file.cc,
//               Checksum: a multiply-rotate mix of little-endian u64s)
// dtype is storage::DType's value (0 f32, 1 f16, 2 bf16, 3 i32, 4 i64).
// The header text is one "key value..." line per field (readable with
// `head -c 1000`); docs/train.md lists the keys and the sections a model
// writes.
//
// Atomicity. WriteCheckpointFile writes a new file beside the target
// (".<name>.tmp-<pid>"), fsyncs it, renames it over the target and fsyncs
// the directory: rename is atomic, so a reader (or a kill at any moment)
// sees the previous file or the new one, whole, never a mix. A temp file
// left by a killed writer is ignored (and replaced by the next write of
// the same process id). Open verifies the checksum before anything is
// read, so a file damaged some other way is refused, not half loaded.
//
// Thread safety: functions of their arguments; a CheckpointFile is used by
// one thread at a time.

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "storage/dtype.h"
#include "tools/train/model_config.h"

namespace ember::train {

struct CheckpointHeader {
  ModelConfig model;
  int64_t step = 0;      // steps trained when it was written
  int64_t position = 0;  // the data position after them (HostBatch::position)
};

// One array to write; `data` is borrowed for the call.
struct SectionOut {
  std::string name;
  storage::DType dtype = storage::DType::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
};

// Writes `header` and `sections` to `path` atomically (see above). Throws
// ember::Error "[WriteCheckpointFile] ..." naming the path and the failed
// call (with errno's text); the previous file at `path`, if any, is then
// unchanged.
void WriteCheckpointFile(const std::string& path, const CheckpointHeader& header,
                         const std::vector<SectionOut>& sections);

class CheckpointFile {
 public:
  struct Section {
    std::string name;
    storage::DType dtype = storage::DType::kF32;
    std::vector<int64_t> shape;
    uint64_t offset = 0;  // of the data in the file
    uint64_t bytes = 0;
  };

  // Opens `path`, checks the magic, the version and the checksum (one pass
  // over the file) and parses the header and the section table. Throws
  // InvalidArgument "[CheckpointFile] PATH: ..." for a missing, truncated,
  // damaged or foreign file.
  static CheckpointFile Open(const std::string& path);

  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] const CheckpointHeader& header() const { return header_; }
  [[nodiscard]] const std::vector<Section>& sections() const { return sections_; }
  // The section named `name`, or null.
  [[nodiscard]] const Section* Find(const std::string& name) const;
  // Reads the section's data into `dst` (section.bytes bytes). Throws
  // InvalidArgument on a read error.
  void Read(const Section& section, void* dst) const;

 private:
  std::string path_;
  CheckpointHeader header_;
  std::vector<Section> sections_;
  std::shared_ptr<std::FILE> file_;
};

}  // namespace ember::train
