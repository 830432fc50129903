#include "tools/train/data/criteo_convert.h"

#include <sys/stat.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tools/train/data/criteo_binary_format.h"
#include "tools/train/data/criteo_line.h"
#include "tools/train/data/criteo_text_reader.h"

namespace ember::train {

ConvertProgress ConvertCriteoText(const std::vector<std::string>& inputs, const std::string& output,
                                  const ConvertOptions& options) {
  CriteoTextReader reader(inputs, options.rows, options.skip_bad_lines, "ConvertCriteoText");
  ConvertProgress progress;
  for (const std::string& path : inputs) {
    struct stat st;
    // A file that cannot be stat'ed fails at its open, with the reason.
    if (::stat(path.c_str(), &st) == 0) progress.bytes_total += st.st_size;
  }
  CriteoBinaryWriter writer(output, options.rows);
  const auto report = [&] {
    progress.examples = writer.examples();
    progress.skipped_lines = reader.skipped_lines();
    progress.bytes_read = reader.bytes_read();
    if (options.progress) options.progress(progress);
  };
  const int64_t every = options.progress_every > 0 ? options.progress_every : int64_t{1} << 20;
  CriteoRecord record;
  while (reader.Next(&record)) {
    writer.Append(record);
    if (writer.examples() % every == 0) report();
  }
  writer.Finish(reader.skipped_lines());
  report();
  return progress;
}

}  // namespace ember::train
