#include "tools/train/data_choice.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "engine/error.h"
#include "tools/train/data/criteo_binary_source.h"
#include "tools/train/data/criteo_text_reader.h"
#include "tools/train/data/criteo_text_source.h"
#include "tools/train/data/synthetic_source.h"

namespace ember::train {
namespace {

constexpr int kCriteoDense = 13;
constexpr int kCriteoTables = 26;

std::vector<std::string> SplitPaths(std::string_view list) {
  std::vector<std::string> paths;
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    if (comma != 0) paths.emplace_back(list.substr(0, comma));
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return paths;
}

std::unique_ptr<BatchSource> Make(const DataChoice& choice, const ModelConfig& model, int64_t batch,
                                  const SyntheticOptions& synthetic) {
  switch (choice.kind) {
    case DataChoice::Kind::kSynthetic:
      return std::make_unique<SyntheticSource>(synthetic);
    case DataChoice::Kind::kCriteoText:
      return std::make_unique<CriteoTextSource>(
          CriteoTextOptions{.batch_size = batch, .paths = choice.paths, .rows = model.table_rows});
    case DataChoice::Kind::kCriteoBinary:
      return std::make_unique<CriteoBinarySource>(CriteoBinaryOptions{
          .batch_size = batch,
          .paths = choice.paths,
          .spec =
              DataSpec{.num_dense = static_cast<int>(model.num_dense), .rows = model.table_rows}});
  }
  return nullptr;
}

bool IsCriteo(const DataOptions& options) {
  return options.train.kind != DataChoice::Kind::kSynthetic ||
         (options.held_out && options.held_out->kind != DataChoice::Kind::kSynthetic);
}

void CheckCriteoShape(const DataOptions& options, const ModelConfig& model) {
  if (!IsCriteo(options)) return;
  if (model.num_dense == kCriteoDense && model.num_tables() == kCriteoTables) return;
  throw InvalidArgument(fmt::format(
      "[--data] Criteo data has {} dense features and {} tables; the model has {} and {} "
      "(set --dense=13 --tables=26)",
      kCriteoDense, kCriteoTables, model.num_dense, model.num_tables()));
}

// Reads the first record of each file of `choice`: a text file's first
// line; a binary source reads every file's header as it opens.
void CheckFilesBegin(const DataChoice& choice, const ModelConfig& model) {
  switch (choice.kind) {
    case DataChoice::Kind::kSynthetic:
      return;
    case DataChoice::Kind::kCriteoText:
      for (const std::string& path : choice.paths) {
        CriteoTextReader reader({path}, model.table_rows, /*skip_bad_lines=*/false,
                                "CriteoTextSource");
        CriteoRecord record;
        (void)reader.Next(&record);
      }
      return;
    case DataChoice::Kind::kCriteoBinary:
      (void)Make(choice, model, 1, {});
      return;
  }
}

}  // namespace

void CheckDataFiles(const DataOptions& options, const ModelConfig& model) {
  CheckCriteoShape(options, model);
  CheckFilesBegin(options.train, model);
  if (options.held_out) CheckFilesBegin(*options.held_out, model);
}

DataChoice ParseDataChoice(std::string_view flag, std::string_view value) {
  DataChoice choice;
  std::string_view paths;
  if (value == "synthetic") return choice;
  if (value.rfind("criteo:", 0) == 0) {
    choice.kind = DataChoice::Kind::kCriteoText;
    paths = value.substr(7);
  } else if (value.rfind("criteo-bin:", 0) == 0) {
    choice.kind = DataChoice::Kind::kCriteoBinary;
    paths = value.substr(11);
  } else {
    throw InvalidArgument(
        fmt::format("[{}] '{}' is not a data source; valid: synthetic, criteo:PATH[,PATH...], "
                    "criteo-bin:PATH[,PATH...]",
                    flag, value));
  }
  choice.paths = SplitPaths(paths);
  if (choice.paths.empty())
    throw InvalidArgument(fmt::format("[{}] '{}' names no file", flag, value));
  for (const std::string& path : choice.paths) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
      throw InvalidArgument(fmt::format("[{}] '{}' is not a readable file", flag, path));
    }
  }
  return choice;
}

DataFactory MakeDataFactory(const DataOptions& options, const ModelConfig& model) {
  CheckCriteoShape(options, model);
  SyntheticOptions train;
  train.batch_size = options.batch_size;
  train.seed = options.seed;
  train.num_examples = options.examples > 0 ? options.examples : kEndless;
  train.num_dense = static_cast<int>(model.num_dense);
  train.rows = model.table_rows;
  train.pooling_mean = options.pooling;
  train.pooling_max = std::max(1, static_cast<int>(std::ceil(2.0 * options.pooling)));
  SyntheticOptions held_out = train;
  held_out.batch_size = options.eval_batch_size > 0 ? options.eval_batch_size : options.batch_size;
  held_out.seed = options.seed + 1;  // the same world, other examples
  held_out.num_examples =
      options.eval_examples > 0 ? options.eval_examples : 8 * held_out.batch_size;

  DataFactory factory;
  factory.train = [choice = options.train, model, batch = options.batch_size, train] {
    return Make(choice, model, batch, train);
  };
  if (options.held_out || options.train.kind == DataChoice::Kind::kSynthetic) {
    const DataChoice choice = options.held_out.value_or(DataChoice{});
    factory.held_out = [choice, model, batch = held_out.batch_size, held_out] {
      return Make(choice, model, batch, held_out);
    };
  }
  return factory;
}

}  // namespace ember::train
