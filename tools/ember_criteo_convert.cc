// ember-criteo-convert: converts Criteo click-log TSV files into Ember's
// binary format (docs/train.md, "Data"), hashed for the model's tables, so
// that training reads them at memory speed.
//
//   ember-criteo-convert --rows=10000000 --output=day_0.bin day_0
//   ember-criteo-convert --rows=1460,583,... --output=train.bin train.txt
//
// The inputs are read in order into one output file, which appears only
// when the conversion succeeded. Progress goes to stderr. Exits 0 on
// success, 1 when the conversion fails (a bad line: file, line and field
// are named; --skip_bad_lines counts and skips them instead), 2 on a usage
// error.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/flags/usage.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_split.h>

#include "engine/base/logging.h"
#include "engine/error.h"
#include "tools/train/data/criteo_convert.h"
#include "tools/train/data/criteo_line.h"

ABSL_FLAG(std::string, rows, "",
          "rows per table: 26 comma-separated sizes, or one size for every table "
          "(categorical values are hashed as value mod rows)");
ABSL_FLAG(std::string, output, "", "the binary file to write");
ABSL_FLAG(bool, skip_bad_lines, false,
          "skip (and count) malformed lines instead of failing at the first");
ABSL_FLAG(int64_t, progress_every, 1 << 22, "examples between progress lines on stderr");

namespace {

struct ConvertArgs {
  std::vector<std::string> inputs;
  std::string output;
  ember::train::ConvertOptions options;
};

// Throws InvalidArgument naming the flag for a bad value.
std::vector<int64_t> ParseRows(const std::string& text) {
  std::vector<int64_t> rows;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int64_t value = 0;
    if (!absl::SimpleAtoi(part, &value) || value < 1) {
      throw ember::InvalidArgument("--rows: '" + std::string(part) +
                                   "' is not a positive number of rows");
    }
    rows.push_back(value);
  }
  if (rows.size() == 1) rows.assign(ember::train::kCriteoNumSparse, rows[0]);
  if (rows.size() != ember::train::kCriteoNumSparse) {
    throw ember::InvalidArgument("--rows: " + std::to_string(rows.size()) +
                                 " sizes; give 1 (for every table) or 26");
  }
  return rows;
}

ConvertArgs ParseArgs(const std::vector<char*>& positional) {
  ConvertArgs args;
  for (size_t i = 1; i < positional.size(); ++i) args.inputs.emplace_back(positional[i]);
  if (args.inputs.empty()) throw ember::InvalidArgument("no input files given");
  args.output = absl::GetFlag(FLAGS_output);
  if (args.output.empty()) throw ember::InvalidArgument("--output is required");
  if (absl::GetFlag(FLAGS_rows).empty()) throw ember::InvalidArgument("--rows is required");
  args.options.rows = ParseRows(absl::GetFlag(FLAGS_rows));
  args.options.skip_bad_lines = absl::GetFlag(FLAGS_skip_bad_lines);
  args.options.progress_every = absl::GetFlag(FLAGS_progress_every);
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "converts Criteo TSV click logs into Ember's binary format.\n"
      "  ember-criteo-convert --rows=N[,N...] --output=OUT.bin IN.tsv [IN.tsv...]");
  const std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  ConvertArgs args;
  try {
    ember::CheckLogLevelFromEnv();
    args = ParseArgs(positional);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ember-criteo-convert: %s\n", e.what());
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  args.options.progress = [start](const ember::train::ConvertProgress& p) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double percent =
        p.bytes_total > 0 ? 100.0 * static_cast<double>(p.bytes_read) / p.bytes_total : 100.0;
    std::fprintf(stderr,
                 "ember-criteo-convert: %lld examples, %lld bad lines skipped, %.1f%% of %.1f MiB, "
                 "%.2f M examples/s\n",
                 static_cast<long long>(p.examples), static_cast<long long>(p.skipped_lines),
                 percent, static_cast<double>(p.bytes_total) / (1 << 20),
                 seconds > 0 ? static_cast<double>(p.examples) / seconds / 1e6 : 0.0);
  };
  try {
    const ember::train::ConvertProgress done =
        ember::train::ConvertCriteoText(args.inputs, args.output, args.options);
    std::fprintf(stderr, "ember-criteo-convert: wrote %s: %lld examples, %lld bad lines skipped\n",
                 args.output.c_str(), static_cast<long long>(done.examples),
                 static_cast<long long>(done.skipped_lines));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ember-criteo-convert: %s\n", e.what());
    return 1;
  }
  return 0;
}
