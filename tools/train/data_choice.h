#pragma once

// DataChoice: which data a run trains and evaluates on, as ember-train's
// --data and --eval_data name it, and the DataFactory (runs.h) that makes
// its sources:
//   synthetic                the embedded click log (data/synthetic_source.h)
//   criteo:PATH[,PATH...]    Criteo's TSV files (data/criteo_text_source.h)
//   criteo-bin:PATH[,...]    the converted binary form (data/criteo_binary_source.h)
//
// Thread safety: plain values; the factory's functions may run on any
// thread, one call at a time.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tools/train/model_config.h"
#include "tools/train/runs.h"

namespace ember::train {

struct DataChoice {
  enum class Kind { kSynthetic, kCriteoText, kCriteoBinary };
  Kind kind = Kind::kSynthetic;
  std::vector<std::string> paths;
};

// Parses the syntax above. Throws InvalidArgument "[--data] ..." naming
// the value and the valid forms, or a path that does not exist.
DataChoice ParseDataChoice(std::string_view flag, std::string_view value);

struct DataOptions {
  DataChoice train;
  // Held-out data; unset with synthetic training data: another stream of
  // the same world (seed + 1), eval_examples long. Unset otherwise: none.
  std::optional<DataChoice> held_out;
  int64_t batch_size = 1024;
  int64_t eval_batch_size = 0;  // 0: batch_size
  uint64_t seed = 1;            // synthetic: the examples' stream
  int64_t examples = 0;         // synthetic training examples; 0: no end
  int64_t eval_examples = 0;    // synthetic held-out examples; 0: 8 batches
  double pooling = 2.0;         // synthetic: mean indices per bag
};

// The factory of `options`' sources for `model` (its dense features and
// table rows; Criteo needs 13 and 26). Throws InvalidArgument for data
// that cannot fit the model (Criteo with another shape).
DataFactory MakeDataFactory(const DataOptions& options, const ModelConfig& model);

// Checks, before a run starts, what MakeDataFactory checks and how each
// file of `options` begins, as its source reads it: the first line of each
// Criteo text file, the header of each binary file (sizes, the model's
// shape). A file that is not of its format at all is so refused before any
// work, naming the file, the line and the field; a bad line further on is
// found where the run reaches it (trainer.h, "Errors"): reading a day of
// the Terabyte logs through first would take as long as training on it.
// Throws InvalidArgument.
void CheckDataFiles(const DataOptions& options, const ModelConfig& model);

}  // namespace ember::train
